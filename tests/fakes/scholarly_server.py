"""Fake SearXNG, arXiv, Semantic Scholar, PubMed (E-utilities), OpenAlex and Crossref APIs
on 127.0.0.1, each in its real wire format and with its real error shapes; and the papers'
landing pages, with citation_* / Dublin Core / JSON-LD meta tags.

One server answers all of them by path (and, for `/works`, by parameter: OpenAlex takes
`search`, Crossref `query`). `modes[provider]` scripts a misbehaviour per provider:
  ok | empty | malformed (junk records, and a record whose fields have the wrong types,
  beside the good ones) | malformed-envelope (the answer's own structure has the wrong
  type: a number for PubMed's idlist, an object for a results list, a feed that is not
  Atom) | bad-json | html (a 200 HTML page instead of the API's format) |
  500 and 429 (each API's own error body; Retry-After: `retry_after`, none if empty) |
  429-once (then ok) | api-error (the API's own error body: arXiv's error entry,
  E-utilities' ERROR, Crossref's validation failure, SearXNG's 403 without the json
  format) | 403 (key refused) | esummary-500, esummary-error (PubMed: esearch answers,
  then esummary fails)
Every request is recorded with its arrival time, parameters and headers.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from html import escape
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http import QuietHandler, close, serve


@dataclass(frozen=True)
class Paper:
    key: str
    title: str
    authors: tuple[tuple[str, str], ...]  # (given, family)
    year: int
    published: str  # ISO date
    venue: str
    abstract: str
    doi: str = ""
    arxiv_id: str = ""
    pmid: str = ""
    publisher: str = ""
    landing: bool = True  # served at /landing/<key>
    tags: str = "citation"  # the landing page's meta tags: citation | dc | jsonld | none

    def full_names(self) -> list[str]:
        return [f"{given} {family}" for given, family in self.authors]


HNSW = Paper(
    "hnsw",
    "Efficient and robust approximate nearest neighbor search using Hierarchical Navigable Small World graphs",
    (("Yury A.", "Malkov"), ("Dmitry A.", "Yashunin")),
    2018,
    "2018-12-28",
    "IEEE Transactions on Pattern Analysis and Machine Intelligence",
    "We present a new approach for the approximate K-nearest neighbor search based on navigable small world "
    "graphs with controllable hierarchy.",
    doi="10.1109/TPAMI.2018.2889473",
    arxiv_id="1603.09320",
    pmid="30602420",
    publisher="IEEE",
)
PQ = Paper(
    "pq",
    "Product quantization for nearest neighbor search",
    (("Hervé", "Jégou"), ("Matthijs", "Douze"), ("Cordelia", "Schmid")),
    2011,
    "2011-01-01",
    "IEEE Transactions on Pattern Analysis and Machine Intelligence",
    "This paper introduces a product quantization based approach for approximate nearest neighbor search.",
    doi="10.1109/TPAMI.2010.57",
    pmid="21088323",
    publisher="IEEE",
    tags="jsonld",
)
DISKANN = Paper(
    "diskann",
    "DiskANN: Fast accurate billion-point nearest neighbor search on a single node",
    (("Suhas Jayaram", "Subramanya"), ("Fnu", "Devvrit"), ("Rohan", "Kadekodi")),
    2019,
    "2019-12-08",
    "Advances in Neural Information Processing Systems",
    "DiskANN indexes a billion points on a single node with 64GB of RAM and an SSD.",
    publisher="Curran Associates",
    tags="dc",
)
NOTHING = Paper(
    "nothing",
    "An unpublished note on vector search",
    (("Ada", "Lovelace"),),
    2020,
    "2020",
    "",
    "A record with no identifier and no landing page.",
    landing=False,
    tags="none",
)
PAPERS = (HNSW, PQ, DISKANN, NOTHING)
# In `malformed` mode: a record with a title and every other field of the wrong type.
ODD = "A record whose fields have the wrong types"
ODD_PMID = "88888888"

# Each API's own 429 and 500 bodies: (content type, body); "{key}" is the requester's key.
RATE_LIMITED: dict[str, tuple[str, str]] = {
    "searxng": ("text/html; charset=utf-8", "Too Many Requests"),  # its limiter (botdetection)
    "arxiv": ("text/plain", "Rate exceeded."),
    "semantic_scholar": (
        "application/json",
        json.dumps(
            {
                "message": "Too Many Requests. Please wait and try again or apply for a key for higher rate limits. "
                "https://www.semanticscholar.org/product/api#api-key-form",
                "code": "429",
            }
        ),
    ),
    "pubmed": ("application/json", '{"error":"API rate limit exceeded","api-key":"{key}","count":"4","limit":"3"}'),
    "openalex": (
        "application/json",
        json.dumps({"error": "Rate limit exceeded", "message": "Too many requests: slow down, or add an API key."}),
    ),
    "crossref": (
        "text/html",
        "<html><body><h1>429 Too Many Requests</h1>\nYou have sent too many requests in a given amount of time.\n"
        "</body></html>",
    ),
}
SERVER_ERROR: dict[str, tuple[str, str]] = {
    "searxng": (  # Flask's own page
        "text/html; charset=utf-8",
        "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n<h1>Internal Server Error</h1>\n"
        "<p>The server encountered an internal error and was unable to complete your request. Either the server "
        "is overloaded or there is an error in the application.</p>\n",
    ),
    "arxiv": ("text/html", "<html><body><h1>500 Internal Server Error</h1></body></html>"),
    "semantic_scholar": ("application/json", '{"message": "Internal server error"}'),
    "pubmed": (
        "text/html",
        "<!DOCTYPE html><html><head><title>NCBI - WWW Error 500 Diagnostic</title></head><body>"
        "<h1>Server Error</h1><p>Your request could not be processed due to a problem on our Web server.</p>"
        "</body></html>",
    ),
    "openalex": (
        "application/json",
        json.dumps({"error": "Internal server error", "message": "Something went wrong. Please try again."}),
    ),
    "crossref": (
        "application/json",
        json.dumps(
            {
                "status": "error",
                "message-type": "exception",
                "message-version": "1.0.0",
                "message": {
                    "name": "class java.lang.RuntimeException",
                    "description": "java.lang.RuntimeException: Solr timed out",
                    "message": "Solr timed out",
                },
            }
        ),
    ),
}


@dataclass
class Hit:
    provider: str
    at: float
    path: str
    params: dict[str, str]
    headers: dict[str, str]


@dataclass
class FakeScholarly:
    papers: tuple[Paper, ...] = PAPERS
    modes: dict[str, str] = field(default_factory=dict)
    retry_after: str = "1"
    s2_key: str = ""  # when set, Semantic Scholar refuses any other x-api-key with 403
    bomb: bytes = b""  # mode "bomb": sent as is with `Content-Encoding: gzip, gzip`
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    _once: set[str] = field(default_factory=set)

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}"

    def landing(self, paper: Paper) -> str:
        return f"{self.base_url}/landing/{paper.key}"

    def of(self, provider: str) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if h.provider == provider]

    # -- formats ----------------------------------------------------------------------------------
    def searxng(self, papers: tuple[Paper, ...], query: str, n: int, junk: bool) -> dict[str, Any]:
        results: list[Any] = [
            {
                "url": self.landing(p),
                "title": p.title,
                "content": p.abstract,
                "engine": "duckduckgo",
                "engines": ["duckduckgo", "brave"],
                "parsed_url": ["http", "127.0.0.1", f"/landing/{p.key}", "", "", ""],
                "template": "default.html",
                "positions": [i + 1],
                "score": 1.0 - i / 10,
                "category": "general",
                "publishedDate": None,
            }
            for i, p in enumerate(papers)
            if p.landing
        ]
        if results and papers[0].doi:
            # Its science engines (crossref, arxiv, pubmed...) answer with the record's fields.
            first = papers[0]
            results[0] |= {
                "engine": "crossref",
                "engines": ["crossref"],
                "template": "paper.html",
                "category": "science",
                "doi": first.doi,
                "journal": first.venue,
                "publisher": first.publisher,
                "authors": first.full_names(),
                "publishedDate": f"{first.published}T00:00:00",
            }
        if junk:
            results += [
                "not an object",
                {"title": "no url"},
                {"url": "javascript:alert(1)", "title": "x"},
                {"url": 5, "title": "a number for a url"},
                {"url": "http://[::1/x", "title": "an unreadable url"},
                {"url": "http://127.0.0.1:99999/x", "title": "a port out of range"},
                {
                    "url": f"{self.base_url}/landing/odd",
                    "title": ODD,
                    "content": ["not", "text"],
                    "authors": "Nobody",
                    "doi": ["10.1/x"],
                    "journal": 7,
                    "publishedDate": {"year": 2020},
                },
            ]
        return {
            "query": query,
            "number_of_results": 0,
            "results": results,
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [["google", "timeout"]],
        }

    def arxiv(self, papers: tuple[Paper, ...], query: str, n: int, junk: bool) -> str:
        entries = []
        for p in [p for p in papers if p.arxiv_id][:n]:
            authors = "".join(f"<author><name>{escape(name)}</name></author>" for name in p.full_names())
            doi = f"<arxiv:doi>{p.doi}</arxiv:doi>" if p.doi else ""
            entries.append(
                f"""<entry>
<id>http://arxiv.org/abs/{p.arxiv_id}v4</id>
<updated>{p.published}T00:00:00Z</updated>
<published>2016-03-30T11:53:50Z</published>
<title>{escape(p.title)}</title>
<summary>  {escape(p.abstract)}
</summary>
{authors}{doi}
<arxiv:journal_ref>{escape(p.venue)} ({p.year})</arxiv:journal_ref>
<link href="http://arxiv.org/abs/{p.arxiv_id}v4" rel="alternate" type="text/html"/>
<link title="pdf" href="http://arxiv.org/pdf/{p.arxiv_id}v4" rel="related" type="application/pdf"/>
<arxiv:primary_category term="cs.DS" scheme="http://arxiv.org/schemas/atom"/>
</entry>"""
            )
        if junk:
            entries.append("<entry><title>An entry without an id</title></entry>")
            entries.append("<entry><id>http://arxiv.org/abs/2101.00001v1</id></entry>")
        return self._feed(query, len(entries), "\n".join(entries))

    @staticmethod
    def not_atom() -> str:
        # Well-formed XML, but RSS (arXiv's listing feeds), not the API's Atom.
        return """<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>cs.DS updates on arXiv.org</title>
<item><title>Efficient and robust approximate nearest neighbor search</title></item></channel></rss>"""

    @staticmethod
    def _feed(query: str, total: int, entries: str) -> str:
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"
      xmlns:arxiv="http://arxiv.org/schemas/atom">
<link href="http://arxiv.org/api/query?search_query%3D{escape(query)}" rel="self" type="application/atom+xml"/>
<title type="html">ArXiv Query: search_query={escape(query)}</title>
<id>http://arxiv.org/api/fake</id>
<updated>2026-11-23T00:00:00-05:00</updated>
<opensearch:totalResults>{total}</opensearch:totalResults>
<opensearch:startIndex>0</opensearch:startIndex>
<opensearch:itemsPerPage>{total}</opensearch:itemsPerPage>
{entries}
</feed>"""

    def arxiv_error(self) -> str:
        entry = """<entry>
<id>http://arxiv.org/api/errors#incorrect_id_format_for_1234.12345</id>
<title>Error</title>
<summary>incorrect id format for 1234.12345</summary>
<updated>2026-11-23T00:00:00-05:00</updated>
<link href="http://arxiv.org/api/errors#incorrect_id_format_for_1234.12345" rel="alternate" type="text/html"/>
<author><name>arXiv api core</name></author>
</entry>"""
        return self._feed("error", 1, entry)

    def s2(self, papers: tuple[Paper, ...], query: str, n: int, junk: bool) -> dict[str, Any]:
        data: list[Any] = []
        for i, p in enumerate(papers[:n]):
            ids: dict[str, Any] = {"CorpusId": 1000 + i}
            if p.doi:
                ids["DOI"] = p.doi
            if p.arxiv_id:
                ids["ArXiv"] = p.arxiv_id
            if p.pmid:
                ids["PubMed"] = p.pmid
            data.append(
                {
                    "paperId": f"{i:040x}",
                    "externalIds": ids,
                    "url": f"https://www.semanticscholar.org/paper/{i:040x}",
                    "title": p.title,
                    "abstract": p.abstract if i % 2 == 0 else None,  # S2 often has none
                    "venue": p.venue,
                    "year": p.year,
                    "publicationDate": p.published if len(p.published) == 10 else None,
                    "journal": {"name": p.venue, "volume": "42"} if p.venue else None,
                    "authors": [{"authorId": str(j), "name": name} for j, name in enumerate(p.full_names())],
                }
            )
        if junk:
            data += [None, {"paperId": "x", "title": None}, {"paperId": "y", "title": "  "}, {"title": ["a list"]}]
            data.append(
                {
                    "paperId": "z",
                    "title": ODD,
                    "externalIds": ["DOI", "10.1/x"],
                    "url": 5,
                    "abstract": {"text": "x"},
                    "venue": ["v"],
                    "journal": "a string",
                    "year": "twenty",
                    "publicationDate": 2020,
                    "authors": "Nobody",
                }
            )
        if not data:
            return {"total": 0, "offset": 0}
        return {"total": len(data), "offset": 0, "next": len(data), "data": data}

    def esearch(self, papers: tuple[Paper, ...], term: str, n: int, junk: bool) -> dict[str, Any]:
        ids: list[Any] = [p.pmid for p in papers if p.pmid][:n]
        if junk:
            ids += ["99999999", ODD_PMID, 12345, None, "not-a-pmid"]
        return {
            "header": {"type": "esearch", "version": "0.3"},
            "esearchresult": {
                "count": str(len(ids)),
                "retmax": str(len(ids)),
                "retstart": "0",
                "idlist": ids,
                "translationset": [],
                "querytranslation": term,
            },
        }

    def esummary(self, papers: tuple[Paper, ...], ids: list[str]) -> dict[str, Any]:
        result: dict[str, Any] = {"uids": ids}
        by_pmid = {p.pmid: p for p in papers if p.pmid}
        for uid in ids:
            p = by_pmid.get(uid)
            if uid == ODD_PMID:
                result[uid] = {
                    "uid": uid,
                    "title": ODD,
                    "pubdate": ["2020"],
                    "sortpubdate": {"year": 2020},
                    "authors": "Nobody",
                    "articleids": {"doi": "10.1/x"},
                    "fulljournalname": ["x"],
                    "source": None,
                }
                continue
            if p is None:
                result[uid] = {"uid": uid, "error": "cannot get document summary"}
                continue
            article_ids = [{"idtype": "pubmed", "idtypen": 1, "value": uid}]
            if p.doi:
                article_ids.append({"idtype": "doi", "idtypen": 3, "value": p.doi})
            result[uid] = {
                "uid": uid,
                "pubdate": f"{p.year} Jan",
                "epubdate": "",
                "source": "IEEE Trans Pattern Anal Mach Intell",
                "authors": [
                    {"name": f"{family} {''.join(w[0] for w in given.replace('.', ' ').split())}", "authtype": "Author"}
                    for given, family in p.authors
                ],
                "lastauthor": p.authors[-1][1],
                "title": p.title + ".",
                "volume": "42",
                "fulljournalname": p.venue,
                "articleids": article_ids,
                "sortpubdate": p.published.replace("-", "/") + " 00:00",
            }
        return {"header": {"type": "esummary", "version": "0.3"}, "result": result}

    def openalex(self, papers: tuple[Paper, ...], query: str, n: int, junk: bool) -> dict[str, Any]:
        results: list[Any] = []
        for i, p in enumerate(papers[:n]):
            words = p.abstract.split()
            inverted: dict[str, list[int]] = {}
            for position, word in enumerate(words):
                inverted.setdefault(word, []).append(position)
            results.append(
                {
                    "id": f"https://openalex.org/W{100 + i}",
                    "doi": f"https://doi.org/{p.doi.lower()}" if p.doi else None,
                    "title": p.title,
                    "display_name": p.title,
                    "publication_year": p.year,
                    "publication_date": p.published if len(p.published) == 10 else f"{p.year}-01-01",
                    "ids": {"openalex": f"https://openalex.org/W{100 + i}"}
                    | ({"pmid": f"https://pubmed.ncbi.nlm.nih.gov/{p.pmid}"} if p.pmid else {}),
                    "primary_location": {
                        "is_oa": False,
                        "landing_page_url": self.landing(p) if p.landing else None,
                        "source": {"display_name": p.venue, "host_organization_name": p.publisher} if p.venue else None,
                    },
                    "authorships": [
                        {"author_position": "first", "author": {"id": f"A{j}", "display_name": name}}
                        for j, name in enumerate(p.full_names())
                    ],
                    "abstract_inverted_index": inverted,
                    "type": "article",
                }
            )
        if junk:
            results += [7, {"id": "W9", "title": None, "display_name": None}]
            results.append(
                {
                    "id": "W8",
                    "title": ["a list"],
                    "display_name": ODD,
                    "doi": 5,
                    "ids": "not an object",
                    "publication_year": "n/a",
                    "publication_date": 2020,
                    "primary_location": {"landing_page_url": ["http://a.example"], "source": "a string"},
                    "authorships": [{"author": "Nobody"}, 3, {"author": {"display_name": 7}}],
                    "abstract_inverted_index": {"word": "not positions"},
                }
            )
        return {
            "meta": {"count": len(results), "db_response_time_ms": 12, "page": 1, "per_page": n},
            "results": results,
        }

    def crossref(self, papers: tuple[Paper, ...], query: str, n: int, junk: bool) -> dict[str, Any]:
        found: list[Any] = []
        for p in [p for p in papers if p.doi][:n]:
            year, month, day = (int(x) for x in p.published.split("-"))
            found.append(
                {
                    "DOI": p.doi,
                    "title": [p.title],
                    "author": [{"given": g, "family": f, "sequence": "first", "affiliation": []} for g, f in p.authors],
                    "container-title": [p.venue],
                    "publisher": p.publisher,
                    "issued": {"date-parts": [[year, month, day]]},
                    "published": {"date-parts": [[year, month]]},
                    "URL": f"http://dx.doi.org/{p.doi}",
                    "abstract": f"<jats:p>{escape(p.abstract)}</jats:p>",
                    "type": "journal-article",
                    "score": 30.5,
                }
            )
        if junk:
            found += ["junk", {"title": ["no DOI"]}, {"DOI": "10.1/x", "title": []}, {"DOI": 5, "title": ["a number"]}]
            found.append(
                {
                    "DOI": "10.5555/odd",
                    "title": ODD,
                    "author": {"family": "Nobody"},
                    "container-title": 5,
                    "publisher": {"name": "x"},
                    "published": {"date-parts": "2020"},
                    "issued": [[2020]],
                    "abstract": ["not", "text"],
                }
            )
        return {
            "status": "ok",
            "message-type": "work-list",
            "message-version": "1.0.0",
            "message": {"facets": {}, "total-results": len(found), "items": found, "items-per-page": n},
        }

    def malformed_envelope(self, provider: str, path: str) -> tuple[int, str, bytes, dict[str, str]]:
        """An answer in the API's format whose own structure has a field of the wrong type."""
        if provider == "arxiv":
            return 200, "application/atom+xml; charset=utf-8", self.not_atom().encode(), {}
        body: Any = {
            "searxng": {"query": "q", "number_of_results": 0, "results": {"0": {"url": "http://a.example"}}},
            "semantic_scholar": {"total": "many", "offset": 0, "data": "none"},
            "pubmed": {
                "header": {"type": "esearch", "version": "0.3"},
                "esearchresult": {"count": "1", "retmax": "1", "retstart": "0", "idlist": 30602420},
            },
            "openalex": {"meta": [], "results": {"W1": {"title": "x"}}},
            "crossref": {"status": "ok", "message-type": "work-list", "message": {"items": {"DOI": "10.1/x"}}},
        }[provider]
        return 200, "application/json", json.dumps(body).encode(), {}

    def landing_page(self, key: str) -> tuple[int, str, bytes] | None:
        paper = next((p for p in self.papers if p.key == key and p.landing), None)
        if paper is None:
            return None
        head = ""
        if paper.tags == "citation":
            head = f'<meta name="citation_title" content="{escape(paper.title)}">'
            head += "".join(f'<meta name="citation_author" content="{f}, {g}">' for g, f in paper.authors)
            head += f'<meta name="citation_publication_date" content="{paper.published.replace("-", "/")}">'
            head += f'<meta name="citation_journal_title" content="{escape(paper.venue)}">'
            head += f'<meta name="citation_publisher" content="{escape(paper.publisher)}">'
            head += f'<meta name="citation_doi" content="{paper.doi}">'
            head += f'<meta name="citation_arxiv_id" content="{paper.arxiv_id}">'
        elif paper.tags == "dc":
            head = "".join(f'<meta name="DC.creator" content="{g} {f}">' for g, f in paper.authors)
            head += f'<meta name="DC.date" content="{paper.published}">'
            head += f'<meta name="DC.publisher" content="{escape(paper.publisher)}">'
            head += f'<meta name="DC.relation.ispartof" content="{escape(paper.venue)}">'
        elif paper.tags == "jsonld":
            ld = {
                "@context": "https://schema.org",
                "@graph": [
                    {"@type": "WebSite", "name": "Fake Publisher"},
                    {
                        "@type": "ScholarlyArticle",
                        "headline": paper.title,
                        "author": [{"@type": "Person", "givenName": g, "familyName": f} for g, f in paper.authors],
                        "datePublished": paper.published,
                        "isPartOf": {"@type": "Periodical", "name": paper.venue},
                        "publisher": {"@type": "Organization", "name": paper.publisher},
                        "sameAs": f"https://doi.org/{paper.doi}",
                    },
                ],
            }
            head = '<script type="application/ld+json">{ broken json </script>'
            head += f'<script type="application/ld+json">{json.dumps(ld)}</script>'
        body = (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(paper.title)}</title>{head}</head>"
            f"<body><article><h1>{escape(paper.title)}</h1><p>{escape(paper.abstract)}</p>"
            f"<p>The method is evaluated on standard benchmarks and compared with earlier indexes.</p>"
            f"</article></body></html>"
        )
        return 200, "text/html; charset=utf-8", body.encode()

    # -- routing ------------------------------------------------------------------------------------
    def route(self, path: str, params: dict[str, str]) -> str | None:
        if path == "/search":
            return "searxng"
        if path == "/api/query":
            return "arxiv"
        if path == "/graph/v1/paper/search":
            return "semantic_scholar"
        if path in ("/esearch.fcgi", "/esummary.fcgi"):
            return "pubmed"
        if path == "/works":
            return "crossref" if "query" in params else "openalex"
        return None

    def handle(self, raw_path: str, headers: dict[str, str]) -> tuple[int, str, bytes, dict[str, str]]:
        parts = urlsplit(raw_path)
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path.startswith("/landing/"):
            page = self.landing_page(parts.path.removeprefix("/landing/"))
            if page is None:
                return 404, "text/html", b"<h1>Not found</h1>", {}
            return (*page, {})
        provider = self.route(parts.path, params)
        if provider is None:
            return 404, "text/html", b"<h1>Not found</h1>", {}
        with self.lock:
            self.hits.append(Hit(provider, time.monotonic(), parts.path, params, headers))
        mode = self.modes.get(provider, "ok")
        as_json = "application/json"
        if mode == "429-once":
            with self.lock:
                first = provider not in self._once
                self._once.add(provider)
            mode = "429" if first else "ok"
        if mode == "429":
            kind, text = RATE_LIMITED[provider]
            key = params.get("api_key") or "127.0.0.1"  # NCBI names the key (or the address) it counted
            return (
                429,
                kind,
                text.replace("{key}", key).encode(),
                ({"Retry-After": self.retry_after} if self.retry_after else {}),
            )
        if mode == "500" or (mode == "esummary-500" and parts.path == "/esummary.fcgi"):
            kind, text = SERVER_ERROR[provider]
            return 500, kind, text.encode(), {}
        if mode == "esummary-error" and parts.path == "/esummary.fcgi":
            body: dict[str, Any] = {"header": {"type": "esummary"}, "error": "Invalid uid 30602420 at position=0"}
            return 200, as_json, json.dumps(body).encode(), {}
        if mode == "html":
            # A maintenance page or a proxy's, answered 200 (well-formed: arXiv's parser reads it).
            notice = (
                '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Down for maintenance</title></head>'
                "<body><p>We are down for maintenance. Please try again later.</p></body></html>"
            )
            return 200, "text/html; charset=utf-8", notice.encode(), {}
        if mode == "malformed-envelope":
            return self.malformed_envelope(provider, parts.path)
        if mode == "403" or (
            provider == "semantic_scholar" and self.s2_key and headers.get("x-api-key") != self.s2_key
        ):
            return 403, as_json, b'{"message": "Forbidden"}', {}
        if mode == "bomb":
            return 200, as_json, self.bomb, {"Content-Encoding": "gzip, gzip"}
        if mode == "bad-json":
            return 200, as_json, b'{"results": [ this is not json', {}
        if mode == "api-error":
            if provider == "arxiv":
                return 400, "application/atom+xml", self.arxiv_error().encode(), {}
            if provider == "pubmed":
                body = {"header": {"type": "esearch"}, "esearchresult": {"ERROR": "Invalid query: unbalanced"}}
                return 200, as_json, json.dumps(body).encode(), {}
            if provider == "crossref":
                body = {
                    "status": "failed",
                    "message-type": "validation-failure",
                    "message": [{"type": "parameter-not-allowed", "value": "x", "message": "Parameter x not allowed"}],
                }
                return 400, as_json, json.dumps(body).encode(), {}
            if provider == "searxng":
                return 403, "text/html", b"<html><body>403 Forbidden</body></html>", {}
            return 400, as_json, json.dumps({"error": "Unrecognized or unsupported fields"}).encode(), {}
        empty = mode == "empty"
        junk = mode == "malformed"
        papers = () if empty else self.papers
        query = params.get("q") or params.get("query") or params.get("search") or params.get("term") or ""
        n = int(params.get("max_results") or params.get("limit") or params.get("retmax") or 0) or int(
            params.get("per-page") or params.get("rows") or 10
        )
        if provider == "arxiv":
            return (
                200,
                "application/atom+xml; charset=utf-8",
                self.arxiv(papers, params.get("search_query", ""), n, junk).encode(),
                {},
            )
        if provider == "pubmed" and parts.path == "/esummary.fcgi":
            answer: dict[str, Any] = self.esummary(papers, params.get("id", "").split(","))
        else:
            answer = {
                "searxng": self.searxng,
                "semantic_scholar": self.s2,
                "pubmed": self.esearch,
                "openalex": self.openalex,
                "crossref": self.crossref,
            }[provider](papers, query, n, junk)
        return 200, as_json, json.dumps(answer).encode(), {}

    def start(self) -> FakeScholarly:
        fake = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, kind, payload, extra = fake.handle(self.path, headers)
                try:
                    self.send_response(status)
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(len(payload)))
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = serve(Handler, "127.0.0.1")
        return self

    def stop(self) -> None:
        close(self.server)
