"""The learned protocol level, ``IRI_LEVEL = "protocol"`` (RFC 3987 section 5.3.4).

Protocol-based comparison: what servers say about their URIs (permanent
redirects, canonical links, robots.txt Clean-param, equal content) is learned
into rules that merge the spellings of one resource.  This optional folder
holds all of it: the evidence readers, the rules and their learner, the rules
document workers exchange, the downloader middleware that feeds them, the
give-back of what a revoked rule skipped, and the stores of that state (JOBDIR
files, Redis keys).  The rest of the package runs without it (levels simple to
scheme); the add-on is the one place that loads it.  Design: docs/protocol.md.
"""
