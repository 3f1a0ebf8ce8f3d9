"""`python -m streams ...` is `pagestream ...`: child processes start with our interpreter."""

from __future__ import annotations

from streams.cli import main

main()
