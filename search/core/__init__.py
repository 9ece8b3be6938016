"""The pure part of search (no Django, no ORM, no I/O): the query language and its
translation to PostgreSQL's websearch syntax and to SQLite FTS5, snippets, bounded regexes."""
