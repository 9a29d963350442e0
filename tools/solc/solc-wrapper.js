#!/usr/bin/env node
// A solc-compatible command line over the npm `solc` package (soljson), for py-solc-x and
// brownie, which accept any executable answering `--version` and `--standard-json`.
//
// Why not solcjs's own CLI: it rejects `--allow-paths` and prints a line before the JSON.
// Imports that the standard-JSON input does not carry are read from disk, relative to the
// working directory, `--base-path`, `--include-path` and `--allow-paths` directories.
// We set process.exitCode instead of calling process.exit(): exiting right after a write
// truncates large outputs in a pipe.
'use strict';

const fs = require('fs');
const path = require('path');
const solc = require(path.join(__dirname, '..', '..', 'node_modules', 'solc'));

function parseArgs(argv) {
  const opts = { version: false, standardJson: false, roots: [process.cwd()] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const takeValue = () => {
      if (arg.includes('=')) return arg.slice(arg.indexOf('=') + 1);
      i += 1;
      return argv[i];
    };
    if (arg === '--version' || arg === '-v') opts.version = true;
    else if (arg === '--standard-json') opts.standardJson = true;
    else if (arg.startsWith('--allow-paths') || arg.startsWith('--base-path') || arg.startsWith('--include-path')) {
      for (const p of String(takeValue()).split(',')) if (p) opts.roots.push(path.resolve(p));
    } else if (arg === '--pretty-json' || arg === '--no-color') {
      // accepted and ignored
    } else {
      process.stderr.write(`solc-wrapper: unsupported argument ${arg}\n`);
      process.exitCode = 2;
      return null;
    }
  }
  return opts;
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts === null) return;
  if (opts.version) {
    process.stdout.write(`solc, the solidity compiler commandline interface\nVersion: ${solc.version()}\n`);
    return;
  }
  if (!opts.standardJson) {
    process.stderr.write('solc-wrapper: only --version and --standard-json are supported\n');
    process.exitCode = 2;
    return;
  }
  const input = fs.readFileSync(0, 'utf8');
  const findImports = (importPath) => {
    const candidates = path.isAbsolute(importPath)
      ? [importPath]
      : opts.roots.map((root) => path.join(root, importPath));
    for (const candidate of candidates) {
      if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) {
        return { contents: fs.readFileSync(candidate, 'utf8') };
      }
    }
    return { error: `File not found: ${importPath} (searched ${opts.roots.join(', ')})` };
  };
  const output = solc.compile(input, { import: findImports });
  process.stdout.write(output + '\n');
}

main();
