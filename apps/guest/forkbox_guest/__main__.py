"""Starts the guest daemon when this package's directory is run as a script."""

import os
import sys

if __name__ == "__main__":
    # a script's own directory leads sys.path; the package is imported from its parent instead, so
    # none of its modules can shadow one of the standard library's
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from forkbox_guest.main import main

    main()
