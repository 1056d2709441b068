"""bench/RESULTS.md holds one section per benchmark script; each script
rewrites its own section and leaves the others as they are."""
import os


def write_section(path: str, heading: str, section: str) -> None:
    """Replaces the section that starts with the line `heading` (e.g.
    "## End to end vs onnxruntime") by `section`, or appends `section` when the
    file has no such line. The section runs to the next "## " heading."""
    text = ""
    if os.path.isfile(path):
        with open(path) as f:
            text = f.read()
    if not text:
        text = "# Benchmarks\n\n"
    start = text.find(heading + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(heading))
        text = text[:start] + section + ("\n" + text[end + 1:] if end >= 0 else "")
    with open(path, "w") as f:
        f.write(text)
