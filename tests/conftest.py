"""Root of the test tree. Its only job: pytest puts this folder on sys.path (rootdir conftest, prepend import
mode), so helpers shared across test folders (`cli_runner`) import by their unique module names."""
