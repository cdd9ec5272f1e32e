"""The optional schedulers: the crash-tolerant ``JOBDIR`` frontier (SQLite) and the
Redis seen-set and fleet queue.

Built on the plugin's dupefilter; imported only when a setting names them.
"""
