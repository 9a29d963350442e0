"""The dashboard's pages: self-contained HTML (inline CSS and JS, charts as inline SVG drawn by the
page's own script), no external fonts, scripts or CDNs: dashboards run on offline machines too.

Each page is a shell that fetches `/api/snapshot` and renders it, then refreshes every few seconds.
"""

from __future__ import annotations

import html

__all__ = ["node_page", "overview_page"]

_CSS = """
:root{--bg:#0f1419;--panel:#171e26;--line:#2a3440;--fg:#d8e0e8;--dim:#8797a8;--ok:#3fb950;--bad:#f85149;
--warn:#d29922;--info:#58a6ff;--vio:#bc8cff}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header{display:flex;align-items:center;gap:18px;padding:12px 22px;border-bottom:1px solid var(--line);
background:var(--panel)}header h1{font-size:17px;margin:0}header a{color:var(--fg);text-decoration:none}
header .meta{color:var(--dim);font-size:12px;margin-left:auto}
main{padding:16px 22px;max-width:1500px}
section{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin:0 0 16px}
h2{font-size:15px;margin:0 0 10px}h2 small{color:var(--dim);font-weight:normal}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);white-space:nowrap}
th{color:var(--dim);font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
a{color:var(--info)}code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;border:1px solid var(--line)}
.b-ok{color:var(--ok);border-color:var(--ok)}.b-bad{color:var(--bad);border-color:var(--bad)}
.b-warn{color:var(--warn);border-color:var(--warn)}.b-info{color:var(--info);border-color:var(--info)}
.b-dim{color:var(--dim)}.b-vio{color:var(--vio);border-color:var(--vio)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:10px;margin-bottom:16px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:10px 14px}
.card .v{font-size:22px;font-weight:600}.card .k{color:var(--dim);font-size:12px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:16px}.grid2 section{margin:0}
@media(max-width:1000px){.grid2{grid-template-columns:1fr}}
.scroll{overflow-x:auto}.err{color:var(--bad)}.dim{color:var(--dim)}
.stages{display:flex;gap:0;align-items:center;flex-wrap:wrap;margin:6px 0 14px}
.stage{padding:6px 14px;border:1px solid var(--line);border-radius:6px;background:#10161c}
.stage.done{border-color:var(--ok)}.stage.bad{border-color:var(--bad);color:var(--bad)}
.stage .n{font-size:11px;color:var(--dim)}.arrow{color:var(--dim);padding:0 6px}
ol.path{list-style:none;margin:0;padding:0 0 0 10px;border-left:2px solid var(--line)}
ol.path li{margin:0 0 8px;padding-left:12px;position:relative}
ol.path li:before{content:"";position:absolute;left:-7px;top:6px;width:10px;height:10px;border-radius:50%;
background:var(--line)}
ol.path li.k-registered:before,ol.path li.k-staked:before{background:var(--info)}
ol.path li.k-task:before{background:var(--vio)}ol.path li.k-proof:before{background:var(--warn)}
ol.path li.k-verdict:before,ol.path li.k-reward:before{background:var(--ok)}
ol.path li.k-slash:before,ol.path li.k-wiped:before,ol.path li.o-upheld:before{background:var(--bad)}
svg text{fill:var(--dim);font-size:11px}pre{white-space:pre-wrap;word-break:break-all;font-size:12px}
"""

_JS_COMMON = r"""
const $=s=>document.querySelector(s);
const esc=s=>String(s??"").replace(/[&<>"']/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
function tok(w){const n=Number(w)/1e18;if(!isFinite(n))return "?";
  return (Math.abs(n)>=1000?n.toLocaleString("en-US",{maximumFractionDigits:1}):String(+n.toFixed(4)))+" INTL"}
function short(a){a=String(a||"");return a.length>14?a.slice(0,8)+"…"+a.slice(-4):a}
function cidShort(c){c=String(c||"");return c.length>20?c.slice(0,12)+"…"+c.slice(-6):c}
function ago(t,now){const d=now-t;if(d<0)return "in "+dur(-d);return dur(d)+" ago"}
function dur(s){s=Math.max(0,Math.round(s));if(s<60)return s+" s";if(s<3600)return Math.floor(s/60)+" min "+(s%60)+" s";
  return Math.floor(s/3600)+" h "+Math.floor(s%3600/60)+" min"}
function when(t){return new Date(t*1000).toISOString().replace("T"," ").slice(0,19)+" UTC"}
const VERDICT={"paid":"b-ok","accepted":"b-ok","in window":"b-info","challenged":"b-warn","slashed":"b-bad",
  "wiped":"b-bad","voided":"b-dim","open":"b-warn","upheld":"b-bad","rejected":"b-ok","no quorum":"b-warn","active":"b-ok","exited":"b-dim","rotated":"b-dim"};
const badge=(t,c)=>`<span class="badge ${c||VERDICT[t]||"b-dim"}">${esc(t)}</span>`;
function nodeLink(snap,a){const n=(snap.nodes||[]).find(x=>x.address.toLowerCase()===String(a).toLowerCase());
  const label=n?`${n.role} ${short(a)}`:short(a);return `<a href="/node/${esc(a)}" title="${esc(a)}">${esc(label)}</a>`}
function lineChart(points,opts){ // points: [{x,y}]; returns an inline SVG
  const W=opts.width||560,H=opts.height||220,P={l:48,r:14,t:14,b:30};
  const pts=points.filter(p=>p.y!==null&&p.y!==undefined&&isFinite(p.y));
  if(!pts.length)return `<p class="dim">${esc(opts.empty||"no data yet")}</p>`;
  let x0=Math.min(...pts.map(p=>p.x)),x1=Math.max(...pts.map(p=>p.x));if(x0===x1){x0-=1;x1+=1}
  let y0=Math.min(0,...pts.map(p=>p.y)),y1=Math.max(...pts.map(p=>p.y));if(y0===y1)y1=y0+1;
  const X=x=>P.l+(x-x0)/(x1-x0)*(W-P.l-P.r),Y=y=>H-P.b-(y-y0)/(y1-y0)*(H-P.t-P.b);
  let g="";for(let i=0;i<=4;i++){const v=y0+(y1-y0)*i/4;g+=`<line x1="${P.l}" x2="${W-P.r}" y1="${Y(v)}" y2="${Y(v)}" stroke="#2a3440"/>`+
    `<text x="${P.l-6}" y="${Y(v)+4}" text-anchor="end">${+v.toFixed(3)}</text>`}
  const xs=[...new Set(pts.map(p=>p.x))];const every=Math.ceil(xs.length/10);
  xs.forEach((x,i)=>{if(i%every===0)g+=`<text x="${X(x)}" y="${H-P.b+16}" text-anchor="middle">${x}</text>`});
  g+=`<text x="${(W+P.l)/2}" y="${H-2}" text-anchor="middle">${esc(opts.xlabel||"")}</text>`;
  let body="";
  if(opts.bars){const bw=Math.max(4,(W-P.l-P.r)/(xs.length+1)*0.6);
    pts.forEach(p=>{body+=`<rect class="bar" x="${X(p.x)-bw/2}" y="${Y(p.y)}" width="${bw}" height="${Y(y0)-Y(p.y)}" fill="${opts.color||"#58a6ff"}"><title>${p.x}: ${p.y}</title></rect>`})}
  else{const d=pts.map((p,i)=>(i?"L":"M")+X(p.x).toFixed(1)+" "+Y(p.y).toFixed(1)).join(" ");
    body=`<path d="${d}" fill="none" stroke="${opts.color||"#3fb950"}" stroke-width="2"/>`+
    pts.map(p=>`<circle class="pt" cx="${X(p.x)}" cy="${Y(p.y)}" r="3.5" fill="${opts.color||"#3fb950"}"><title>${opts.xlabel||"x"} ${p.x}: ${p.y}</title></circle>`).join("")}
  return `<svg class="chart" data-chart="${esc(opts.id||"")}" viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="${esc(opts.label||"")}">${g}${body}</svg>`}
async function getJSON(u){const r=await fetch(u,{cache:"no-store"});const j=await r.json();if(!r.ok)throw new Error(j.error||r.status);return j}
function startLoop(render,url,every){let busy=false;
  async function tick(){if(busy)return;busy=true;try{const s=await getJSON(url);render(s);$("#conn").textContent="live"}
    catch(e){$("#conn").textContent="error: "+e.message}finally{busy=false}}
  tick();setInterval(tick,every)}
function headerMeta(s){$("#meta").innerHTML=`chain ${s.chain_id} · block ${s.block} · chain time ${when(s.chain_time)} · <span id="conn">live</span>`}
"""

_JS_OVERVIEW = r"""
function render(s){
  headerMeta(s);const t=s.totals,now=s.chain_time;
  const cards=[["nodes",t.nodes],["checkpoints",t.checkpoints],["submissions",t.submissions],["accepted",t.accepted],
    ["pending windows",t.pending_windows],["challenges",t.challenges],["upheld",t.upheld],["slashed",tok(t.slashed)],
    ["rewards claimed",tok(t.rewards_claimed)],["agents up",t.agents_up+" / "+t.nodes]];
  $("#cards").innerHTML=cards.map(([k,v])=>`<div class="card" data-k="${esc(k)}"><div class="v">${esc(v)}</div><div class="k">${esc(k)}</div></div>`).join("");
  $("#nodes tbody").innerHTML=s.nodes.map(n=>`<tr data-node="${esc(n.address)}"><td><a href="/node/${esc(n.address)}">${esc(short(n.address))}</a></td>
    <td>${esc(n.role)}</td><td>${badge(n.status)}</td><td>${esc(n.gpu_count+" x "+n.gpu_model)}${n.vram_gib?" ("+n.vram_gib+" GiB)":""}</td>
    <td class="num">${tok(n.stake_deposited)}</td><td class="num">${tok(n.stake_active)}</td><td class="num">${n.submissions}</td>
    <td class="num">${n.accepted}</td><td class="num">${n.challenged}</td><td class="num">${n.slashed?'<span class="err">'+tok(n.slashed)+'</span>':"0"}</td>
    <td class="num">${tok(n.rewards_claimed)}</td><td class="num">${n.challenges_opened}/${n.votes_cast}</td>
    <td>${n.agent_status?badge("up","b-ok")+" "+esc(n.agent_status.state||n.agent_status.phase||"")+(n.agent_status.warning?` <span class="err warning" title="${esc(n.agent_status.warning)}">${esc(n.agent_status.warning)}</span>`:""):(n.agent_error?(n.agent_asked===false?`<small title="${esc(n.agent_error)}">not asked</small>`:`<span class="err" title="${esc(n.agent_error)}">down</span>`):"")}</td></tr>`).join("")
    ||`<tr><td colspan="13" class="dim">no nodes registered</td></tr>`;
  $("#checkpoints tbody").innerHTML=s.checkpoints.map(c=>`<tr data-step="${c.step}"><td class="num">${c.step}</td><td>${c.pool_id}</td>
    <td class="mono" title="${esc(c.manifest_cid)}">${esc(c.manifest_cid)}</td><td class="num">${c.submissions}</td>
    <td class="num">${c.rollouts_used??"–"}</td><td class="num">${c.mean_reward===null||c.mean_reward===undefined?"–":c.mean_reward.toFixed(3)}</td>
    <td class="num">${c.eval_pass_at_1===null||c.eval_pass_at_1===undefined?"–":c.eval_pass_at_1.toFixed(3)}</td>
    <td>${when(c.time)}</td></tr>`).join("")||`<tr><td colspan="8" class="dim">no checkpoint published yet</td></tr>`;
  $("#subs tbody").innerHTML=[...s.submissions].reverse().map(x=>`<tr data-sub="${x.submission_id}"><td class="num">${x.submission_id}</td>
    <td>${nodeLink(s,x.node)}</td><td class="num">${x.policy_step}</td><td class="num">${x.work_units}</td><td class="num">${tok(x.reward)}</td>
    <td class="mono" title="${esc(x.rollouts_cid)}">${esc(cidShort(x.rollouts_cid))}</td><td>${badge(x.verdict)}</td>
    <td class="num">${x.seconds_left>0?"closes in "+dur(x.seconds_left):"closed"}</td></tr>`).join("")
    ||`<tr><td colspan="8" class="dim">no submissions yet</td></tr>`;
  $("#chals tbody").innerHTML=s.challenges.map(c=>`<tr data-challenge="${c.challenge_id}"><td class="num">${c.challenge_id}</td>
    <td>${nodeLink(s,c.node)}</td><td>${nodeLink(s,c.challenger)}</td><td>${badge(c.status)}</td>
    <td class="num">${c.votes_for}</td><td class="num">${c.votes_against}</td>
    <td>${c.votes.map(v=>nodeLink(s,v.validator)+" "+(v.uphold?badge("uphold","b-bad"):badge("reject","b-ok"))).join("<br>")||'<span class="dim">challenger only</span>'}</td>
    <td class="num">${c.status==="open"?(c.seconds_left>0?"vote ends in "+dur(c.seconds_left):"resolvable"):"–"}</td>
    <td class="num">${c.slashed?tok(c.slashed):"–"}</td></tr>`).join("")||`<tr><td colspan="9" class="dim">no challenges</td></tr>`;
  const curve=s.reward_curve;
  $("#reward").innerHTML=lineChart(curve.map(p=>({x:p.step,y:p.mean_reward})),{id:"reward",label:"mean reward per policy step",
    xlabel:"policy step",empty:"no mean reward reported by the trainer's /status yet"});
  $("#perstep").innerHTML=lineChart(curve.map(p=>({x:p.step,y:p.submissions})),{id:"submissions",bars:true,color:"#58a6ff",
    label:"submissions per policy step",xlabel:"policy step",empty:"no submissions yet"});
  $("#errors").innerHTML=(s.errors||[]).map(e=>`<div class="err">${esc(e)}</div>`).join("");
  document.body.dataset.loaded="1";
}
startLoop(render,"/api/snapshot",REFRESH_MS);
"""

_JS_NODE = r"""
const STAGES=[["registered","registered"],["task","task"],["proof","proof"],["verdict","verdict"],["reward","reward / slash"]];
function render(s){
  headerMeta(s);const n=s.nodes.find(x=>x.address.toLowerCase()===NODE.toLowerCase());
  if(!n){$("#node").innerHTML=`<p class="err">node ${esc(NODE)} is not registered on this deployment</p>`;document.body.dataset.loaded="1";return}
  const path=s.paths[n.address]||[];
  const has=k=>path.some(e=>e.kind===k);const bad=path.some(e=>e.kind==="slash"||e.outcome==="upheld");
  const stageHtml=STAGES.map(([k,label])=>{let cls="",cnt=path.filter(e=>e.kind===k).length;
    if(k==="reward"){cnt=path.filter(e=>e.kind==="reward").length;const sl=path.filter(e=>e.kind==="slash").length;
      cls=sl?"bad":(cnt?"done":"");return `<div class="stage ${cls}" data-stage="${k}">${label}<div class="n">${cnt} reward${cnt===1?"":"s"}${sl?", "+sl+" slash":""}</div></div>`}
    if(k==="verdict"){const up=path.filter(e=>e.kind==="verdict"&&e.outcome==="upheld").length;const ok=path.filter(e=>e.kind==="verdict"&&e.outcome!=="upheld").length;
      cls=up?"bad":(ok?"done":"");return `<div class="stage ${cls}" data-stage="${k}">${label}<div class="n">${ok} accepted${up?", "+up+" upheld":""}</div></div>`}
    cls=has(k)?"done":"";return `<div class="stage ${cls}" data-stage="${k}">${label}<div class="n">${cnt}</div></div>`}).join('<span class="arrow">→</span>');
  const st=n.agent_status;
  $("#node").innerHTML=`<section><h2>${esc(n.role)} node <span class="mono">${esc(n.address)}</span> ${badge(n.status)} ${bad?badge("slashed","b-bad"):""}</h2>
    <table class="kv"><tr><th>owner</th><td class="mono">${esc(n.owner)}</td><th>hardware</th><td>${esc(n.gpu_count+" x "+n.gpu_model)} (${n.vram_gib} GiB)</td></tr>
    <tr><th>endpoint</th><td class="mono">${esc(n.endpoint||"–")}</td><th>registered</th><td>${when(n.registered_at)}</td></tr>
    <tr><th>stake deposited</th><td>${tok(n.stake_deposited)}</td><th>stake now</th><td id="stake-now">${tok(n.stake_active)}${n.stake_unbonding?" (+ "+tok(n.stake_unbonding)+" unbonding)":""}</td></tr>
    <tr><th>submissions</th><td>${n.submissions} (${n.accepted} accepted, ${n.pending} in window)</td><th>challenged / upheld</th><td>${n.challenged} / ${n.upheld}</td></tr>
    <tr><th>slashed</th><td>${tok(n.slashed)}</td><th>rewards claimed</th><td>${tok(n.rewards_claimed)} (${tok(n.rewards_claimable)} claimable)</td></tr>
    <tr><th>challenges opened</th><td>${n.challenges_opened}</td><th>votes cast</th><td>${n.votes_cast}</td></tr>
    ${n.rotated_to||n.rotated_from?`<tr><th>key rotated to</th><td class="mono">${n.rotated_to?esc(n.rotated_to):"–"}</td><th>rotated from</th><td class="mono">${n.rotated_from?esc(n.rotated_from):"–"}</td></tr>`:""}</table></section>
    <section><h2>Path <small>registered → task → proof → verdict → reward / slash</small></h2><div class="stages">${stageHtml}</div>
    <ol class="path">${path.map(e=>`<li class="k-${esc(e.kind)} o-${esc(e.outcome||"none")}" data-kind="${esc(e.kind)}"><b>${esc(e.kind)}</b>
      ${e.outcome?badge(e.outcome,e.outcome==="upheld"?"b-bad":"b-ok"):""} <span class="dim">${when(e.time)} · block ${e.block}</span><br>
      ${esc(e.detail)}</li>`).join("")||'<li class="dim">nothing yet</li>'}</ol></section>
    <section><h2>Agent status <small>${esc(n.agent_url||"")}</small></h2>${st?`<pre id="agent-status">${esc(JSON.stringify(st,null,2))}</pre>`:`<p class="err">${esc(n.agent_error||"no status")}</p>`}</section>`;
  document.body.dataset.loaded="1";
}
startLoop(render,"/api/snapshot",REFRESH_MS);
"""


def _shell(title: str, body: str, script: str, refresh_ms: int, extra_js: str = "") -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width,initial-scale=1"><title>{html.escape(title)}</title><style>{_CSS}</style>'
            f'</head><body><header><h1><a href="/">intellect-protocol</a></h1><span>{html.escape(title)}</span>'
            f'<span class="meta" id="meta">loading…</span></header><main>{body}</main>'
            f'<script>const REFRESH_MS={int(refresh_ms)};{extra_js}{_JS_COMMON}{script}</script></body></html>')


def overview_page(refresh_ms: int = 3000) -> str:
    body = """
<div class="cards" id="cards"></div>
<div id="errors"></div>
<section><h2>Nodes <small>stake, work and verdicts from the chain; agent state from each node's /status</small></h2>
<div class="scroll"><table id="nodes"><thead><tr><th>node</th><th>role</th><th>status</th><th>hardware</th>
<th class="num">staked</th><th class="num">stake now</th><th class="num">submissions</th><th class="num">accepted</th>
<th class="num">challenged</th><th class="num">slashed</th><th class="num">rewards claimed</th>
<th class="num">challenges/votes</th><th>agent</th></tr></thead><tbody></tbody></table></div></section>
<div class="grid2"><section><h2>Reward curve <small>mean task reward per policy step (trainer)</small></h2><div id="reward"></div></section>
<section><h2>Submissions per policy step <small>(chain)</small></h2><div id="perstep"></div></section></div><br>
<section><h2>Checkpoints <small>per step</small></h2><div class="scroll"><table id="checkpoints"><thead><tr>
<th class="num">step</th><th>pool</th><th>manifest CID</th><th class="num">submissions</th><th class="num">rollouts used</th>
<th class="num">mean reward</th><th class="num">held-out pass@1</th><th>published</th></tr></thead><tbody></tbody></table></div></section>
<section><h2>Submissions <small>verdict and window countdown</small></h2><div class="scroll"><table id="subs"><thead><tr>
<th class="num">id</th><th>node</th><th class="num">policy step</th><th class="num">units</th><th class="num">reward</th>
<th>rollouts CID</th><th>verdict</th><th class="num">window</th></tr></thead><tbody></tbody></table></div></section>
<section><h2>Challenges <small>with votes</small></h2><div class="scroll"><table id="chals"><thead><tr>
<th class="num">id</th><th>challenged node</th><th>challenger</th><th>status</th><th class="num">for</th>
<th class="num">against</th><th>votes</th><th class="num">vote period</th><th class="num">slashed</th></tr></thead>
<tbody></tbody></table></div></section>"""
    return _shell("swarm dashboard", body, _JS_OVERVIEW, refresh_ms)


def node_page(address: str, refresh_ms: int = 3000) -> str:
    import json

    return _shell(f"node {address}", '<div id="node"></div>', _JS_NODE, refresh_ms,
                  extra_js=f"const NODE={json.dumps(address)};")
