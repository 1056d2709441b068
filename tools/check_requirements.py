"""Exits 0 when every requirement in the given requirements file is installed."""
import sys
from importlib import metadata

import re


def main(path: str) -> int:
    for line in open(path):
        line = line.split("#")[0].strip()
        if not line:
            continue
        name = re.split(r"[<>=!~\[ ;]", line, maxsplit=1)[0]
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            print(f"missing: {name}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
