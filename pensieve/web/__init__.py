"""Reaching the web safely: the SSRF guard, robots.txt, the guarded fetcher, extraction,
and the search providers. Tools in `pensieve.tools.web` put these together."""
