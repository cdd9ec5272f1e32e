"""``python -m sample_project``: crawl the demo web with and without iri_scrapy, compare."""

from sample_project.run_demo import main

if __name__ == "__main__":
    raise SystemExit(main())
