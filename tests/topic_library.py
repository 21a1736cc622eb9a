"""A fixture library of topics on distinct subjects, and queries that paraphrase them.

No query shares a word with its topic's title (checked by a test), so a hit means the
search matched meaning, not keywords.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pensieve.topics.library import render_topic


@dataclass(frozen=True)
class FixtureTopic:
    slug: str
    title: str
    tags: tuple[str, ...]
    summary: str
    body: str


def _topic(slug: str, title: str, tags: str, summary: str, *sections: tuple[str, str]) -> FixtureTopic:
    body = "\n\n".join(f"## {heading}\n\n{text}" for heading, text in sections)
    return FixtureTopic(slug, title, tuple(tags.split(",")), summary, body)


TOPICS: list[FixtureTopic] = [
    _topic(
        "raft",
        "Raft consensus algorithm",
        "distributed-systems",
        "A protocol that keeps replicated logs identical across a cluster despite crashes.",
        (
            "Leader election",
            "Servers start as followers. A follower that hears no heartbeat within its election timeout "
            "becomes a candidate and requests votes; a candidate with votes from a majority becomes "
            "leader for that term.",
        ),
        (
            "Log replication",
            "The leader appends client commands to its log and sends them to followers. An entry is "
            "committed once a majority has stored it, and committed entries are applied in order.",
        ),
    ),
    _topic(
        "sourdough",
        "Sourdough bread baking",
        "cooking",
        "Naturally leavened loaves raised by a starter culture instead of commercial yeast.",
        (
            "The starter",
            "A starter is flour and water colonised by wild yeasts and lactobacilli. Fed daily, it "
            "becomes active enough to raise dough within a few hours.",
        ),
        (
            "Fermentation and crumb",
            "Long, cold fermentation develops the sour flavour from lactic and acetic acid and gives an "
            "open, glossy crumb with a blistered crust.",
        ),
    ),
    _topic(
        "photosynthesis",
        "Photosynthesis in plants",
        "biology",
        "How chloroplasts capture light energy to build sugars from carbon dioxide and water.",
        (
            "Light reactions",
            "Chlorophyll in the thylakoid membranes absorbs light, splitting water and releasing oxygen "
            "while producing ATP and NADPH.",
        ),
        (
            "Calvin cycle",
            "In the stroma the enzyme RuBisCO fixes carbon dioxide, and the cycle uses ATP and NADPH to "
            "make glucose that feeds the leaf and the rest of the organism.",
        ),
    ),
    _topic(
        "black-holes",
        "Black holes and event horizons",
        "astronomy",
        "Collapsed objects whose gravity is so strong that not even light can escape them.",
        (
            "Formation",
            "When a massive star exhausts its fuel its core collapses; if the remnant is heavy enough "
            "nothing stops the collapse and a singularity forms.",
        ),
        (
            "Observation",
            "Astronomers detect them through accretion discs that glow in X-rays, stars orbiting an "
            "unseen mass, and gravitational waves from mergers.",
        ),
    ),
    _topic(
        "aqueducts",
        "Roman aqueducts",
        "history,engineering",
        "The channels that carried water into ancient cities across valleys on arched bridges.",
        (
            "Gradient",
            "Engineers surveyed routes that fell only a few centimetres per hundred metres, so water "
            "flowed by gravity alone for tens of kilometres.",
        ),
        (
            "Distribution",
            "Water arrived at a castellum and was split into pipes feeding public fountains, baths and "
            "the houses of the wealthy.",
        ),
    ),
    _topic(
        "vaccines",
        "Vaccine immunology",
        "medicine",
        "How vaccination primes the immune system to recognise a pathogen before infection.",
        (
            "Antigens",
            "A vaccine presents an antigen, an inactivated virus, a protein subunit or mRNA encoding "
            "one, so that B cells and T cells learn to recognise it.",
        ),
        (
            "Memory",
            "Memory lymphocytes persist for years, so a later infection triggers a fast antibody "
            "response; boosters refresh fading protection.",
        ),
    ),
    _topic(
        "btree",
        "B-tree indexes in databases",
        "databases",
        "Balanced trees that keep sorted keys in disk pages so lookups need few reads.",
        (
            "Structure",
            "Each node is a page holding many keys and child pointers; the tree stays balanced by "
            "splitting full nodes, so every leaf is at the same depth.",
        ),
        (
            "Range scans",
            "Leaves are linked, which makes range queries and ordered scans cheap after one descent from the root.",
        ),
    ),
    _topic(
        "inflation",
        "Inflation and central bank interest rates",
        "economics",
        "Why monetary authorities raise borrowing costs when prices climb.",
        (
            "Policy rate",
            "Raising the policy rate makes credit dearer, cooling spending and investment, which eases "
            "pressure on prices over the following year or two.",
        ),
        (
            "Expectations",
            "If households expect prices to keep climbing they demand higher wages; credibility lets "
            "the authority anchor those expectations.",
        ),
    ),
    _topic(
        "plate-tectonics",
        "Plate tectonics",
        "geology",
        "The theory that Earth's lithosphere is broken into slabs that move over the mantle.",
        (
            "Boundaries",
            "Where slabs diverge new crust forms at mid-ocean ridges; where they converge one subducts, "
            "building mountain ranges and deep trenches.",
        ),
        (
            "Earthquakes",
            "Stress builds where slabs grind past each other and is released suddenly as an "
            "earthquake along the fault.",
        ),
    ),
    _topic(
        "coffee-roasting",
        "Coffee roasting",
        "food",
        "Turning green beans into aromatic brown ones with carefully controlled heat.",
        (
            "First crack",
            "As beans heat, moisture turns to steam and they pop audibly; light roasts stop soon after "
            "this first crack to keep acidity and fruit notes.",
        ),
        (
            "Maillard and caramelisation",
            "Sugars and amino acids react to form hundreds of flavour compounds; darker roasts bring "
            "bitterness and body.",
        ),
    ),
    _topic(
        "marathon",
        "Marathon training",
        "sport",
        "Preparing the body to run 42.195 kilometres.",
        (
            "Long runs",
            "A weekly long run, building towards 30 to 35 kilometres, trains endurance and teaches the "
            "body to burn fat.",
        ),
        (
            "Taper and fuelling",
            "Mileage drops in the last two to three weeks, and carbohydrate loading fills glycogen "
            "stores before race day.",
        ),
    ),
    _topic(
        "bee-decline",
        "Honeybee colony collapse",
        "ecology",
        "Why managed bee hives have been dying in large numbers.",
        (
            "Varroa mites",
            "The parasitic Varroa destructor mite feeds on developing insects and spreads deformed wing "
            "virus through the hive.",
        ),
        (
            "Pesticides",
            "Neonicotinoid insecticides impair foraging and navigation, and poor forage weakens colonies further.",
        ),
    ),
    _topic(
        "quantum-computing",
        "Quantum computing with qubits",
        "physics,computing",
        "Computers that use superposition and entanglement to solve some problems faster.",
        (
            "Qubits",
            "A qubit holds a superposition of 0 and 1; entangled registers let algorithms such as Shor's "
            "factor large numbers.",
        ),
        (
            "Decoherence",
            "Noise destroys fragile states within microseconds, so machines need error correction with "
            "many physical units per logical one.",
        ),
    ),
    _topic(
        "french-revolution",
        "The French Revolution",
        "history",
        "The upheaval that began in 1789, abolished the monarchy and reshaped Europe.",
        (
            "1789",
            "The storming of the Bastille and the Declaration of the Rights of Man marked the end of "
            "absolute royal power in Paris.",
        ),
        (
            "The Terror",
            "Under Robespierre the Committee of Public Safety sent thousands to the guillotine before "
            "the Thermidorian reaction.",
        ),
    ),
    _topic(
        "garbage-collection",
        "Garbage collection in programming languages",
        "computing",
        "Runtime systems that find and free memory a program can no longer reach.",
        (
            "Mark and sweep",
            "The collector marks every object reachable from the roots and sweeps the rest back into the free list.",
        ),
        (
            "Generational heaps",
            "Most objects die young, so a nursery is collected often and cheaply, and survivors are "
            "promoted to an old generation.",
        ),
    ),
    _topic(
        "chess-openings",
        "Chess openings",
        "games",
        "The opening phase of a game of chess and its named systems.",
        (
            "Principles",
            "Control the centre, develop knights and bishops quickly and castle early to keep the king safe.",
        ),
        (
            "Named lines",
            "The Sicilian Defence, the Queen's Gambit and the Ruy Lopez are studied in depth by grand masters.",
        ),
    ),
    _topic(
        "climate-change",
        "Climate change and greenhouse gases",
        "environment",
        "How emissions of carbon dioxide and methane trap heat and warm the planet.",
        (
            "Greenhouse effect",
            "Gases in the atmosphere absorb infrared radiation emitted by the surface, so more of them "
            "means a warmer equilibrium temperature.",
        ),
        (
            "Consequences",
            "Sea levels rise, heatwaves intensify and ice sheets retreat as global average temperature climbs.",
        ),
    ),
    _topic(
        "jazz-improvisation",
        "Jazz improvisation",
        "music",
        "Inventing melodies on the spot over a tune's harmony.",
        (
            "Chord changes",
            "Soloists outline each chord with scales and arpeggios, using guide tones to make the harmony audible.",
        ),
        (
            "Vocabulary",
            "Players learn licks by transcribing recordings of Charlie Parker or John Coltrane and then vary them.",
        ),
    ),
    _topic(
        "public-key-crypto",
        "Public key cryptography",
        "security",
        "Encryption with a pair of keys: one published, one kept secret.",
        (
            "Key pairs",
            "Anyone can encrypt with the published half, but only the holder of the private half can "
            "decrypt; RSA relies on the difficulty of factoring.",
        ),
        (
            "Signatures",
            "Signing with the private half lets anyone verify authorship with the published half, the "
            "basis of TLS certificates.",
        ),
    ),
    _topic(
        "volcanoes",
        "Volcanic eruptions",
        "geology",
        "How molten rock reaches the surface and why some volcanoes explode.",
        (
            "Magma",
            "Magma rich in silica is viscous and traps gas, so pressure builds until it blasts out ash and pumice.",
        ),
        (
            "Hazards",
            "Pyroclastic flows, lahars and ash clouds threaten towns and aircraft far from the vent.",
        ),
    ),
    _topic(
        "circadian-rhythm",
        "Sleep and circadian rhythms",
        "health",
        "The body's internal clock and why we feel drowsy at night.",
        (
            "The master clock",
            "The suprachiasmatic nucleus in the hypothalamus keeps a roughly 24 hour cycle reset each "
            "morning by daylight.",
        ),
        (
            "Melatonin",
            "The pineal gland releases melatonin in darkness; screens and jet lag shift its timing.",
        ),
    ),
    _topic(
        "kubernetes",
        "Container orchestration with Kubernetes",
        "devops",
        "Running containerised services across a cluster of machines.",
        (
            "Pods and scheduling",
            "The scheduler places pods on nodes with free CPU and memory; controllers restart failed "
            "pods to match the desired state.",
        ),
        (
            "Services",
            "A service gives a stable address to a changing set of pods and load-balances traffic between them.",
        ),
    ),
    _topic(
        "origami",
        "Origami paper folding",
        "crafts",
        "The Japanese art of shaping a single square sheet into figures without cuts.",
        (
            "Bases",
            "Most models start from a few bases, such as the bird base used for the traditional crane.",
        ),
        (
            "Mathematics",
            "Crease patterns obey flat-foldability theorems, and folding has inspired deployable satellite antennas.",
        ),
    ),
    _topic(
        "antibiotic-resistance",
        "Antibiotic resistance",
        "medicine",
        "Bacteria evolving so that drugs that once killed them no longer work.",
        (
            "Mechanisms",
            "Bacteria acquire genes for enzymes such as beta-lactamase that destroy penicillin, or pumps "
            "that expel the drug.",
        ),
        (
            "Overuse",
            "Prescribing for viral infections and feeding livestock routine doses select for resistant "
            "strains like MRSA.",
        ),
    ),
    _topic(
        "silk-road",
        "The Silk Road trade routes",
        "history",
        "Overland caravan networks linking China with Persia and the Mediterranean.",
        (
            "Goods",
            "Camels carried textiles, spices, porcelain and paper westward and brought silver and glassware east.",
        ),
        (
            "Ideas",
            "Buddhism, technologies and also the plague travelled along the caravanserais between "
            "oasis cities like Samarkand.",
        ),
    ),
    _topic(
        "backpropagation",
        "Neural network backpropagation",
        "machine-learning",
        "How deep learning models compute gradients to update their weights.",
        (
            "Chain rule",
            "The error at the output is propagated backwards layer by layer using the chain rule, "
            "giving the derivative of the loss for every parameter.",
        ),
        (
            "Gradient descent",
            "An optimiser such as SGD or Adam then nudges each weight against its gradient, and the "
            "cycle repeats over many mini-batches.",
        ),
    ),
    _topic(
        "composting",
        "Composting at home",
        "gardening",
        "Turning kitchen scraps and garden waste into humus.",
        (
            "Greens and browns",
            "Mix nitrogen-rich vegetable peelings with carbon-rich dry leaves and cardboard, and keep "
            "the heap as moist as a wrung-out sponge.",
        ),
        (
            "Worms",
            "In a wormery, red wigglers digest scraps into castings that make an excellent soil conditioner.",
        ),
    ),
    _topic(
        "solar-panels",
        "Solar panels and photovoltaic cells",
        "energy",
        "Generating electricity directly from daylight with semiconductors.",
        (
            "The photovoltaic effect",
            "Photons knock electrons loose in a silicon p-n junction, driving a direct current that an "
            "inverter converts for the grid.",
        ),
        (
            "Efficiency",
            "Commercial modules turn about 20 percent of incoming light into power; output falls when "
            "they are hot or shaded.",
        ),
    ),
    _topic(
        "impressionism",
        "Impressionist painting",
        "art",
        "The nineteenth-century French movement that painted light and atmosphere en plein air.",
        (
            "Technique",
            "Monet, Renoir and Pissarro used loose, visible brushstrokes and unmixed colour to catch "
            "fleeting effects of sunlight.",
        ),
        (
            "Reception",
            "Rejected by the Salon, the group held its own exhibitions from 1874, and critics mocked "
            "the works as unfinished sketches.",
        ),
    ),
    _topic(
        "tides",
        "Ocean tides and the Moon",
        "oceanography",
        "Why coastal water levels rise and fall about twice a day.",
        (
            "Tidal forces",
            "Lunar gravity pulls harder on the near side of Earth than the far side, raising two bulges "
            "of sea water that the planet rotates through.",
        ),
        (
            "Spring and neap",
            "When Sun and lunar pull align the range is largest; at quarter phases it is smallest.",
        ),
    ),
    _topic(
        "rust-ownership",
        "Rust ownership and borrowing",
        "programming",
        "A systems language's compile-time rules for memory safety.",
        (
            "Ownership",
            "Every value has a single owner and is dropped when the owner goes out of scope, so memory "
            "is freed deterministically.",
        ),
        (
            "The borrow checker",
            "References are either many shared or one mutable, checked by the compiler, which rules "
            "out dangling pointers and data races.",
        ),
    ),
    _topic(
        "wine-making",
        "Wine fermentation",
        "food",
        "How grape juice becomes wine in the cellar.",
        (
            "Alcoholic fermentation",
            "Yeast converts the sugar of crushed grapes into ethanol and carbon dioxide over one to two "
            "weeks; reds ferment with their skins for colour.",
        ),
        (
            "Ageing",
            "Malolactic conversion softens acidity, and oak barrels add vanilla and tannin during "
            "months of maturation.",
        ),
    ),
    _topic(
        "everest",
        "Climbing Mount Everest",
        "mountaineering",
        "Expeditions to the summit of the world's highest peak.",
        (
            "Altitude",
            "Above 8,000 metres, in the death zone, the air holds a third of the oxygen at sea level; "
            "climbers acclimatise and breathe bottled gas.",
        ),
        (
            "Sherpas",
            "Sherpa guides fix ropes through the Khumbu Icefall and carry loads between the camps.",
        ),
    ),
    _topic(
        "ev-batteries",
        "Electric vehicle batteries",
        "energy,transport",
        "The lithium-ion packs in cars that plug in, and how they age.",
        (
            "Chemistry",
            "Cells shuttle lithium ions between a graphite anode and a nickel or iron phosphate "
            "cathode; pack capacity sets the driving range.",
        ),
        (
            "Degradation",
            "Fast charging, heat and deep discharge grow the solid electrolyte interphase, and "
            "capacity fades by a few percent a year.",
        ),
    ),
]

# slug -> paraphrases that share no word with the topic's title.
QUERIES: dict[str, list[str]] = {
    "raft": [
        "how replicated servers agree on one leader and keep identical logs after crashes",
        "leader voting among cluster nodes",
    ],
    "sourdough": ["making naturally leavened loaves with a wild yeast starter culture", "homemade tangy loaf"],
    "photosynthesis": ["how leaves turn sunlight, water and carbon dioxide into sugar"],
    "black-holes": ["collapsed stars whose gravity lets not even light escape"],
    "aqueducts": ["ancient engineering that carried water into cities over arched bridges"],
    "vaccines": [
        "how jabs train the body's defences to recognise a virus before infection",
        "getting immunised against measles",
    ],
    "btree": [
        "balanced search structures that keep sorted keys on disk pages for fast lookups",
        "how a table lookup avoids scanning every row on disk",
    ],
    "inflation": [
        "why rising prices make monetary authorities raise borrowing costs",
        "cost of living going up and what the fed does about it",
    ],
    "plate-tectonics": ["continents drifting on slabs of crust, causing earthquakes and mountain ranges"],
    "coffee-roasting": ["heating green beans until they pop and turn brown and aromatic"],
    "marathon": ["preparing to run 42 kilometres: long runs, tapering and carbohydrate loading"],
    "bee-decline": [
        "why hives are dying off because of varroa mites and pesticides",
        "pollinator losses and the parasites behind them",
    ],
    "quantum-computing": [
        "machines that exploit superposition and entanglement to calculate",
        "Shor's factoring on future hardware",
    ],
    "french-revolution": ["the 1789 uprising in Paris that toppled the monarchy and led to the guillotine"],
    "garbage-collection": [
        "automatic memory reclamation by mark and sweep and generational heaps",
        "freeing unused objects automatically in Java",
    ],
    "chess-openings": ["the first moves of a board game with kings, queens, bishops and pawns"],
    "climate-change": ["how carbon dioxide emissions trap heat and warm the planet"],
    "jazz-improvisation": ["musicians spontaneously inventing solos over chord progressions"],
    "public-key-crypto": [
        "encrypting messages so only the holder of a private secret can read them",
        "how HTTPS certificates prove identity",
    ],
    "volcanoes": ["magma rising through the crust and exploding as lava and ash"],
    "circadian-rhythm": [
        "the body's internal 24-hour clock and why we get drowsy at night",
        "why am I tired after a long flight",
    ],
    "kubernetes": [
        "scheduling docker workloads in pods across a cluster of machines",
        "deploying microservices at scale",
    ],
    "origami": ["making cranes and other figures by creasing one square sheet"],
    "antibiotic-resistance": ["germs evolving so that drugs like penicillin no longer kill them"],
    "silk-road": ["ancient caravan paths linking China with Persia and the Mediterranean"],
    "backpropagation": ["how deep learning models compute gradients with the chain rule to adjust weights"],
    "composting": ["turning kitchen scraps and garden waste into rich soil with worms"],
    "solar-panels": [
        "rooftop modules converting sunlight into electric current with silicon",
        "renewable electricity from my roof",
    ],
    "impressionism": ["Monet and Renoir's loose brushstrokes capturing outdoor light"],
    "tides": [
        "why sea levels along coasts rise and fall twice daily because of lunar gravity",
        "high water and low water at the beach",
    ],
    "rust-ownership": ["a systems language whose compiler prevents dangling pointers and data races"],
    "wine-making": [
        "how yeast turns crushed grape juice into an alcoholic drink in a cellar",
        "what happens in a vineyard cellar after harvest",
    ],
    "everest": [
        "reaching the top of the world's highest summit: thin air, sherpas and bottled oxygen",
        "Himalayan expedition dangers",
    ],
    "ev-batteries": ["lithium-ion packs powering cars that plug in, and how their capacity fades"],
}

# Queries about nothing in the library: they must return no topic at all.
UNRELATED_QUERIES = [
    "how do I renew my passport at the embassy",
    "lyrics of a happy birthday song",
    "what is the capital of Peru",
    "deadline for filing a tax return",
    "football world cup winners",
]


def write_library(topics_dir: Path, topics: list[FixtureTopic] = TOPICS) -> None:
    topics_dir.mkdir(parents=True, exist_ok=True)
    for topic in topics:
        text = render_topic(topic.title, topic.body, tags=topic.tags, summary=topic.summary, updated="2025-01-01")
        (topics_dir / f"{topic.slug}.md").write_text(text, encoding="utf-8")
