"""The RFC 3987 core: parsing, mapping, hosts, the comparison ladder, SURT, explain, bidi.

Pure functions over strings: no I/O, no Scrapy, no w3lib, no Twisted.  Each module
cites the section of the RFC (or of the URL Standard, UTS #46) it follows.
"""
