"""atheris harness for the manifest reader (fuzz/targets.py: READERS["manifest"]).

    python fuzz/fuzz_manifest.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/manifest     (or: python fuzz/run.py --reader manifest)
"""

from harness import main

if __name__ == "__main__":
    main("manifest")
