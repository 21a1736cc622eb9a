"""Hand-written source pages for bench/real_model.py --sources: three or four short pages
per brief, archived with SourceArchive.add as a fetch would, and research notes that cite
them as [S1].., so that a real drafter has sources to cite and the evidence check runs.

The pages state concrete facts (numbers, names, years) on purpose: a sentence of the draft
that changes one of them is one the evidence check must not call supported.
"""

from __future__ import annotations

from pathlib import Path

# brief -> [(url, title, text)]; a brief not listed gets the first brief's pages.
PAGES: dict[str, list[tuple[str, str, str]]] = {
    "How vector databases index embeddings": [
        (
            "https://docs.example.org/hnsw",
            "HNSW graphs for approximate nearest neighbour search",
            "Hierarchical Navigable Small World (HNSW) graphs were described by Yury Malkov and Dmitry "
            "Yashunin in 2016. An HNSW index stores every vector as a node in several layers of proximity "
            "graphs. The top layer holds few nodes and the bottom layer holds all of them. A search starts "
            "at the top layer and greedily moves to the neighbour closest to the query, then descends one "
            "layer and repeats. The parameter M sets how many neighbours each node keeps; a common default "
            "is 16. The parameter efConstruction, often 200, sets how many candidates are considered while "
            "the graph is built. HNSW gives high recall at low latency but keeps the whole graph in memory.",
        ),
        (
            "https://blog.example.net/ivf-indexes",
            "Inverted file indexes for vectors",
            "An inverted file (IVF) index first clusters the vectors with k-means into nlist cells, each with "
            "a centroid. A query is compared with the centroids and only the vectors of the nprobe closest "
            "cells are scanned. With nlist set to 4096 and nprobe to 16, a search reads well under one percent "
            "of the collection. Raising nprobe improves recall and slows the search. IVF indexes must be "
            "trained on a sample of the data before vectors are added, and they need retraining when the "
            "data drifts far from the sample.",
        ),
        (
            "https://wiki.example.com/product-quantization",
            "Product quantization",
            "Product quantization (PQ), introduced by Herve Jegou, Matthijs Douze and Cordelia Schmid in 2011, "
            "compresses vectors so that billions fit in memory. Each vector is split into m sub-vectors, and "
            "each sub-vector is replaced by the id of its nearest centroid in a small codebook of 256 entries, "
            "so one sub-vector costs a single byte. A 128-dimensional float vector of 512 bytes can be stored "
            "in 16 bytes with m set to 16. Distances are then estimated from precomputed tables, which is fast "
            "but loses some accuracy, so systems often re-rank the best candidates with the full vectors.",
        ),
        (
            "https://engineering.example.io/vector-db-updates",
            "Keeping a vector index up to date",
            "Vector databases such as Milvus, Qdrant and Weaviate accept inserts while serving queries. Graph "
            "indexes handle deletes by marking nodes as deleted rather than removing them, and the marked "
            "nodes are cleaned up later by a rebuild or a compaction. New vectors are often written to a small "
            "buffer that is searched by brute force until it is merged into the main index. Benchmarks such "
            "as ANN-Benchmarks compare indexes by recall at a fixed number of queries per second.",
        ),
    ],
    "Why sourdough bread rises without commercial yeast": [
        (
            "https://bakery.example.org/starter-microbes",
            "The microbes in a sourdough starter",
            "A sourdough starter is a mixture of flour and water colonised by wild yeasts and lactic acid "
            "bacteria. The most common yeasts are Saccharomyces cerevisiae and Kazachstania humilis, and the "
            "dominant bacterium is usually Fructilactobacillus sanfranciscensis. Bacteria outnumber the yeasts "
            "by about 100 to 1. The yeasts produce carbon dioxide, which makes the dough rise, while the "
            "bacteria produce lactic and acetic acid, which give the bread its sour taste.",
        ),
        (
            "https://science.example.net/sourdough-acidity",
            "Acidity and flavour in sourdough",
            "A mature starter has a pH between 3.5 and 4.0. The acidity keeps most other microbes out, which is "
            "why a starter stays stable for years. Lactic acid gives a mild, yoghurt-like sourness; acetic acid "
            "gives a sharper, vinegar-like note. Cooler fermentation, around 20 degrees Celsius, favours acetic "
            "acid, while warmer fermentation favours lactic acid.",
        ),
        (
            "https://kitchen.example.com/feeding-a-starter",
            "Feeding and timing a starter",
            "Bakers feed a starter by discarding part of it and adding fresh flour and water, often in a 1:1:1 "
            "ratio of starter, flour and water by weight. At 24 to 27 degrees Celsius a healthy starter doubles "
            "in volume within 4 to 8 hours of feeding. A new starter usually needs 5 to 7 days of daily feeding "
            "before it can raise bread. Sourdough dough rises more slowly than dough made with commercial yeast, "
            "often taking 4 to 12 hours for the bulk fermentation.",
        ),
    ],
}

_NOTES = {
    "How vector databases index embeddings": """# Research notes: {topic}

## What problem does it solve?
- Comparing a query with every stored vector is too slow for large collections, so vector
  databases build approximate nearest neighbour indexes [S1] [S2].

## How does the core mechanism work?
- HNSW, described by Malkov and Yashunin in 2016, stores vectors in layered proximity graphs;
  a search starts at the sparse top layer and descends greedily [S1].
- The HNSW parameter M (often 16) sets neighbours per node; efConstruction (often 200) sets
  the candidates considered while building [S1].
- IVF indexes cluster vectors with k-means into nlist cells and scan only the nprobe closest
  cells; nlist 4096 with nprobe 16 reads under one percent of the data [S2].

## Which variants are in use?
- Product quantization (Jegou, Douze and Schmid, 2011) splits vectors into m sub-vectors and
  stores one byte per sub-vector from a 256-entry codebook: 512 bytes become 16 [S3].
- Systems re-rank the best PQ candidates with the full vectors to recover accuracy [S3].

## What are the trade-offs?
- HNSW gives high recall at low latency but keeps the whole graph in memory [S1].
- Raising nprobe improves recall and slows the search; IVF needs training and retraining
  when the data drifts [S2].
- Graph indexes mark deleted nodes and clean them up later; new vectors wait in a small
  brute-force buffer before being merged [S4].

## How is it evaluated?
- ANN-Benchmarks compares indexes by recall at a fixed number of queries per second [S4].

## Open questions
- How well benchmark results carry over to real workloads remains disputed.
""",
    "Why sourdough bread rises without commercial yeast": """# Research notes: {topic}

## What problem does it solve?
- Sourdough raises bread with a starter of wild yeasts and lactic acid bacteria instead of
  commercial yeast [S1].

## How does the core mechanism work?
- The yeasts, mostly Saccharomyces cerevisiae and Kazachstania humilis, make the carbon
  dioxide that raises the dough [S1].
- Bacteria, usually Fructilactobacillus sanfranciscensis, outnumber yeasts about 100 to 1 and
  make lactic and acetic acid [S1].

## Which variants are in use?
- Bakers feed starters 1:1:1 by weight; at 24 to 27 degrees Celsius a starter doubles in
  4 to 8 hours [S3].
- A new starter needs 5 to 7 days of daily feeding before it can raise bread [S3].

## What are the trade-offs?
- A mature starter has a pH of 3.5 to 4.0, which keeps other microbes out [S2].
- Cooler fermentation (about 20 degrees Celsius) favours sharper acetic acid; warmer favours
  lactic acid [S2].
- Sourdough rises more slowly: bulk fermentation takes 4 to 12 hours [S3].

## How is it evaluated?
- Bakers judge a starter by how fast it doubles after feeding [S3].

## Open questions
- How much each microbe contributes to flavour is still studied.
""",
}


def pages_for(brief: str) -> list[tuple[str, str, str]]:
    return PAGES.get(brief, PAGES["How vector databases index embeddings"])


def seed_sources(folder: Path, brief: str) -> int:
    """Archive the brief's pages in the project at `folder`; returns how many."""
    from pensieve.project.source_archive import SourceArchive

    archive = SourceArchive(folder)
    pages = pages_for(brief)
    for url, title, text in pages:
        html = f"<html><head><title>{title}</title></head><body><p>{text}</p></body></html>"
        archive.add(url=url, final_url=url, title=title, content_type="text/html", body=html.encode(), text=text)
    return len(pages)


def research_notes(brief: str) -> str:
    template = _NOTES.get(brief, _NOTES["How vector databases index embeddings"])
    return template.format(topic=brief)


# Seeded first drafts (--seed drafter or later, with --sources): cited, mostly faithful to the
# pages above, with planted errors the evidence check should flag: a changed number, a fact
# given to the wrong source, a claim no source makes. The reviser is then given them to fix.
_DRAFTS = {
    "How vector databases index embeddings": """# How vector databases index embeddings

## The problem

Comparing a query with every stored vector is too slow once a collection holds millions of
items, so vector databases build approximate nearest neighbour indexes instead [S1]. They
give up a little accuracy to answer in milliseconds.

## Graphs: HNSW

Hierarchical Navigable Small World graphs were described by Yury Malkov and Dmitry Yashunin
in 2016 [S1]. The index keeps every vector as a node in several layers of proximity graphs,
with few nodes at the top and all of them at the bottom [S1]. A search starts at the top
layer, moves greedily towards the query and descends one layer at a time [S1]. Each node
keeps M neighbours, and a common default for M is 64 [S1]. HNSW was first built at Google to
rank search results [S1].

## Clusters: IVF

An inverted file index clusters the vectors with k-means into nlist cells [S2]. A query is
compared with the centroids, and only the nprobe closest cells are scanned [S2]. With nlist
set to 4096 and nprobe to 16, a search reads well under one percent of the collection [S2].
IVF indexes never need to be trained before vectors are added [S2].

## Compression: product quantization

Product quantization splits each vector into m sub-vectors and stores each as one byte, the
id of its nearest centroid in a codebook of 256 entries [S3]. A 128-dimensional vector of 512
bytes then fits in 16 bytes [S3]. Product quantization was introduced by Malkov and Yashunin
in 2011 [S3]. Systems re-rank the best candidates with the full vectors to win back accuracy
[S3].

## Keeping the index current

Graph indexes mark deleted nodes instead of removing them and clean them up in a later
compaction [S4]. New vectors wait in a small buffer searched by brute force until they are
merged [S4]. Benchmarks such as ANN-Benchmarks compare recall at a fixed number of queries
per second [S4]. Most production systems now rebuild their whole index every hour [S4].
""",
    "Why sourdough bread rises without commercial yeast": """# Why sourdough bread rises without commercial yeast

## A living starter

A sourdough starter is flour and water colonised by wild yeasts and lactic acid bacteria
[S1]. The yeasts, mostly Saccharomyces cerevisiae and Kazachstania humilis, make the carbon
dioxide that raises the dough [S1]. The bacteria outnumber the yeasts by about 10 to 1 [S1].
The starter was first cultivated in ancient Egypt around 1500 BC [S1].

## Acid and flavour

A mature starter has a pH between 3.5 and 4.0, and that acidity keeps other microbes out
[S2]. Lactic acid tastes mild, like yoghurt, while acetic acid tastes sharper, like vinegar
[S2]. Warmer fermentation favours acetic acid [S2]. The acid also keeps sourdough bread fresh
for two weeks [S2].

## Feeding and time

Bakers feed a starter by discarding part of it and adding flour and water in a 1:1:1 ratio
[S3]. At 24 to 27 degrees Celsius a healthy starter doubles within 4 to 8 hours [S3]. A new
starter needs 5 to 7 days of daily feeding before it can raise bread [S3]. Bulk fermentation
of sourdough takes 4 to 12 hours, longer than with commercial yeast [S3]. Most bakers keep
their starter in the freezer between bakes [S3].

## Why it works without commercial yeast

The wild yeasts of the starter do the work of commercial yeast, more slowly, while the
bacteria add the acids that give the bread its taste and keep the starter stable [S1] [S2].
A baker who wants a milder loaf ferments it warm, and one who wants a sharper loaf ferments
it cool, because temperature changes which acid the bacteria make [S2]. Patience is the
price: a starter must be fed for days before its first loaf, and every loaf needs hours of
bulk fermentation before it can be shaped and baked [S3].
""",
}


def draft(brief: str) -> str:
    return _DRAFTS.get(brief, _DRAFTS["How vector databases index embeddings"])
