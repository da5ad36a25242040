"""Word lists for the English-German grammar: nouns, adjectives, verbs and pronouns.

Nouns are written ``gender German/Plural[/Oblique] english[/plural] tags [place]``.
Oblique is the accusative/dative singular of weak masculine nouns (den Jungen).
Tags: P person, A animal, t portable thing, r readable, w writable, s sendable,
o openable, k packable, x repairable, c cleanable, b buildable, e switchable,
y tidyable, v vehicle (one waits for it), g story, f food, d drink (mass noun,
singular only), l place, h place to live in, a water to swim in.
A place carries ``direction-preposition,location-preposition,english-location``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NOUNS = """
m Mann/Männer man/men P
f Frau/Frauen woman/women P
n Kind/Kinder child/children P
m Junge/Jungen/Jungen boy P
n Mädchen/Mädchen girl P
m Lehrer/Lehrer teacher P
m Arzt/Ärzte doctor P
m Student/Studenten/Studenten student P
m Nachbar/Nachbarn/Nachbarn neighbour P
m Freund/Freunde friend P
m Bruder/Brüder brother P
f Schwester/Schwestern sister P
m Vater/Väter father P
f Mutter/Mütter mother P
m Sohn/Söhne son P
f Tochter/Töchter daughter/daughters P
m Koch/Köche cook P
m Bauer/Bauern/Bauern farmer P
m Polizist/Polizisten/Polizisten policeman/policemen P
m Verkäufer/Verkäufer salesman/salesmen P
m Fahrer/Fahrer driver P
m Sänger/Sänger singer P
m Künstler/Künstler artist P
m Kollege/Kollegen/Kollegen colleague P
m Chef/Chefs boss P
m Gast/Gäste guest P
m Onkel/Onkel uncle P
f Tante/Tanten aunt P
m Großvater/Großväter grandfather P
f Großmutter/Großmütter grandmother P
n Baby/Babys baby P
m Schüler/Schüler pupil P
m Professor/Professoren professor P
m Richter/Richter judge P
m Soldat/Soldaten/Soldaten soldier P
m König/Könige king P
f Königin/Königinnen queen P
m Prinz/Prinzen/Prinzen prince P
f Prinzessin/Prinzessinnen princess P
m Kellner/Kellner waiter P
f Kellnerin/Kellnerinnen waitress P
m Pilot/Piloten/Piloten pilot P
m Journalist/Journalisten/Journalisten journalist P
m Maler/Maler painter P
m Bäcker/Bäcker baker P
m Tourist/Touristen/Touristen tourist P
m Präsident/Präsidenten/Präsidenten president P
m Kunde/Kunden/Kunden customer P
m Dieb/Diebe thief/thieves P
m Herr/Herren/Herrn gentleman/gentlemen P
f Dame/Damen lady P
m Mechaniker/Mechaniker mechanic P
m Ingenieur/Ingenieure engineer P
m Fischer/Fischer fisherman/fishermen P
m Gärtner/Gärtner gardener P
f Krankenschwester/Krankenschwestern nurse P
m Schauspieler/Schauspieler actor P
f Schauspielerin/Schauspielerinnen actress P
m Briefträger/Briefträger postman/postmen P
m Hund/Hunde dog A
f Katze/Katzen cat A
n Pferd/Pferde horse A
m Vogel/Vögel bird A
f Maus/Mäuse mouse/mice A
f Kuh/Kühe cow A
n Schwein/Schweine pig A
m Bär/Bären/Bären bear A
m Löwe/Löwen/Löwen lion A
m Affe/Affen/Affen monkey A
m Elefant/Elefanten/Elefanten elephant A
m Fuchs/Füchse fox A
m Wolf/Wölfe wolf/wolves A
f Ziege/Ziegen goat A
f Ente/Enten duck A
n Huhn/Hühner chicken A
f Schlange/Schlangen snake A
m Frosch/Frösche frog A
m Tiger/Tiger tiger A
m Esel/Esel donkey A
n Kaninchen/Kaninchen rabbit A
m Hase/Hasen/Hasen hare A
f Giraffe/Giraffen giraffe A
n Zebra/Zebras zebra A
f Eule/Eulen owl A
m Papagei/Papageien parrot A
f Biene/Bienen bee A
m Hamster/Hamster hamster A
m Delfin/Delfine dolphin A
n Krokodil/Krokodile crocodile A
n Lamm/Lämmer lamb A
m Hahn/Hähne rooster A
n Buch/Bücher book trso
f Zeitung/Zeitungen newspaper tr
m Brief/Briefe letter trwso
f Zeitschrift/Zeitschriften magazine tr
m Roman/Romane novel trw
n Gedicht/Gedichte poem rw
f Geschichte/Geschichten story/stories rwg
m Witz/Witze joke g
n Märchen/Märchen fairy_tale g
m Artikel/Artikel article rw
f Nachricht/Nachrichten message rws
f Postkarte/Postkarten postcard trws
f Liste/Listen list trw
f Speisekarte/Speisekarten menu tr
m Text/Texte text rw
n Heft/Hefte notebook t
m Stift/Stifte pen t
m Bleistift/Bleistifte pencil t
m Tisch/Tische table xc
m Stuhl/Stühle chair txc
n Bett/Betten bed xc
m Schrank/Schränke cupboard ocy
n Fenster/Fenster window ocx
f Tür/Türen door ocx
f Lampe/Lampen lamp tex
n Licht/Lichter light e
n Radio/Radios radio tex
m Fernseher/Fernseher television ex
m Computer/Computer computer tex
n Telefon/Telefone telephone tx
f Uhr/Uhren clock tx
m Schlüssel/Schlüssel key t
f Tasche/Taschen bag tok
m Koffer/Koffer suitcase tok
f Kiste/Kisten box tok
f Flasche/Flaschen bottle to
n Glas/Gläser glass tc
f Tasse/Tassen cup tc
m Teller/Teller plate tc
n Messer/Messer knife/knives t
f Gabel/Gabeln fork t
m Löffel/Löffel spoon t
m Topf/Töpfe pot tc
m Ball/Bälle ball t
n Spielzeug/Spielzeuge toy t
f Puppe/Puppen doll t
n Geschenk/Geschenke present tsk
n Bild/Bilder picture t
n Foto/Fotos photo ts
f Landkarte/Landkarten map tr
m Hut/Hüte hat t
f Jacke/Jacken jacket tc
m Mantel/Mäntel coat tc
n Hemd/Hemden shirt tc
m Schuh/Schuhe shoe tc
n Kleid/Kleider dress tc
m Rock/Röcke skirt tc
m Schirm/Schirme umbrella t
n Auto/Autos car xc
n Fahrrad/Fahrräder bicycle xc
m Bus/Busse bus v
m Zug/Züge train v
n Taxi/Taxis taxi v
n Boot/Boote boat xc
n Flugzeug/Flugzeuge plane x
n Haus/Häuser house bclh zu,in,in
f Brücke/Brücken bridge b
m Turm/Türme tower b
f Mauer/Mauern wall b
f Hütte/Hütten hut b
m Zaun/Zäune fence bx
n Dach/Dächer roof bx
f Straße/Straßen road bc
n Zimmer/Zimmer room cy
f Wohnung/Wohnungen flat cy
m Schreibtisch/Schreibtische desk cyx
f Kerze/Kerzen candle t
m Teppich/Teppiche carpet tc
n Kissen/Kissen pillow t
f Decke/Decken blanket t
m Spiegel/Spiegel mirror tc
f Vase/Vasen vase t
f Blume/Blumen flower t
m Stein/Steine stone t
f Münze/Münzen coin t
f Fahrkarte/Fahrkarten ticket t
m Pass/Pässe passport t
f Rechnung/Rechnungen bill t
n Klavier/Klaviere piano x
f Kamera/Kameras camera tx
m Rucksack/Rucksäcke backpack tok
n Paket/Pakete parcel tosk
m Kalender/Kalender calendar t
n Wörterbuch/Wörterbücher dictionary/dictionaries tr
m Kühlschrank/Kühlschränke fridge ocx
f Waschmaschine/Waschmaschinen washing_machine x
m Ofen/Öfen oven exc
f Heizung/Heizungen heater ex
m Ventilator/Ventilatoren fan ex
m Drucker/Drucker printer ex
n Tor/Tore gate o
m Eimer/Eimer bucket tc
m Besen/Besen broom t
m Korb/Körbe basket t
n Seil/Seile rope t
f Leiter/Leitern ladder t
m Hammer/Hämmer hammer t
m Nagel/Nägel nail t
n Werkzeug/Werkzeuge tool t
n Zelt/Zelte tent t
m Apfel/Äpfel apple tf
f Banane/Bananen banana tf
f Birne/Birnen pear tf
f Orange/Orangen orange tf
f Tomate/Tomaten tomato/tomatoes tf
f Kartoffel/Kartoffeln potato/potatoes tf
f Karotte/Karotten carrot tf
n Ei/Eier egg tf
n Brötchen/Brötchen roll tf
m Kuchen/Kuchen cake tf
f Suppe/Suppen soup f
f Pizza/Pizzas pizza tf
f Wurst/Würste sausage tf
m Salat/Salate salad f
n Steak/Steaks steak f
m Keks/Kekse biscuit tf
f Zitrone/Zitronen lemon tf
f Erdbeere/Erdbeeren strawberry/strawberries tf
f Kirsche/Kirschen cherry/cherries tf
f Zwiebel/Zwiebeln onion tf
f Gurke/Gurken cucumber tf
m Pfirsich/Pfirsiche peach tf
f Melone/Melonen melon tf
m Hamburger/Hamburger hamburger tf
n Schnitzel/Schnitzel schnitzel f
f Brezel/Brezeln pretzel tf
f Nuss/Nüsse nut tf
f Milch/- milk d
n Wasser/- water d
m Kaffee/- coffee d
m Tee/- tea d
m Saft/- juice d
n Bier/- beer d
m Wein/- wine d
f Limonade/- lemonade d
m Kakao/- cocoa d
m Park/Parks park l in,in,in
m Garten/Gärten garden l in,in,in
f Stadt/Städte city/cities lh in,in,in
n Dorf/Dörfer village lh in,in,in
f Schule/Schulen school l in,in,at
n Kino/Kinos cinema l in,in,at
n Museum/Museen museum l in,in,in
m Bahnhof/Bahnhöfe station l zu,an,at
f Bank/Banken bank l zu,in,in
m Markt/Märkte market l auf,auf,at
f Bäckerei/Bäckereien bakery/bakeries l in,in,in
m Supermarkt/Supermärkte supermarket l in,in,in
n Restaurant/Restaurants restaurant l in,in,in
n Hotel/Hotels hotel lh in,in,in
n Krankenhaus/Krankenhäuser hospital l in,in,in
f Bibliothek/Bibliotheken library/libraries l in,in,in
n Büro/Büros office l in,in,in
f Küche/Küchen kitchen l in,in,in
m Wald/Wälder forest l in,in,in
m Strand/Strände beach l an,an,on
m See/Seen lake la an,an,at
m Berg/Berge mountain l auf,auf,on
m Zoo/Zoos zoo l in,in,at
n Theater/Theater theatre l in,in,at
f Kirche/Kirchen church l in,in,in
f Apotheke/Apotheken pharmacy/pharmacies l in,in,in
m Flughafen/Flughäfen airport l zu,an,at
f Universität/Universitäten university/universities l zu,an,at
f Haltestelle/Haltestellen stop l zu,an,at
m Fluss/Flüsse river la an,an,at
n Café/Cafés café l in,in,in
n Schwimmbad/Schwimmbäder swimming_pool la in,in,at
n Stadion/Stadien stadium l in,in,at
f Fabrik/Fabriken factory/factories l in,in,in
n Meer/Meere sea la an,an,by
f Insel/Inseln island l auf,auf,on
"""

# German adjective, English, noun classes it describes (P person, A animal, T thing,
# F food, D drink, L place); optional attributive stem when it differs.
ADJECTIVES = """
alt old PATL
jung young PA
neu new TL
groß big PATFL
klein small PATFL
nett nice P
klug clever PA
müde tired PA
glücklich happy PA
freundlich friendly PA
reich rich P
arm poor P
krank ill PA
traurig sad PA
hungrig hungry PA
fleißig diligent P
neugierig curious PA
berühmt famous PL
schwarz black ATF
weiß white AT
braun brown AT
wild wild A
schnell fast A
langsam slow A
dick fat A
rot red TF
blau blue T
grün green TF
gelb yellow TF
teuer expensive TF teur
billig cheap TF
schön beautiful TL
schwer heavy T
leicht light T
schmutzig dirty T
modern modern TL
bunt colourful T
frisch fresh FD
lecker delicious F
kalt cold FD
warm warm FD
heiß hot D
süß sweet FD
ruhig quiet L
leer empty L
"""

# infinitive (| marks a separable prefix), 3rd person singular present, participle,
# auxiliary (h/s), English base|3sg|participle ('-' = regular), frame, subject
# classes, object tags.  Frames: acc, dat, ditr, intr, dir, loc (location required),
# prep:PREP:CASE.
VERBS = """
lesen liest gelesen h read|-|read acc P r
schreiben - geschrieben h write|-|written acc P w
kaufen - gekauft h buy|-|bought acc P tfd
verkaufen - verkauft h sell|-|sold acc P t
sehen sieht gesehen h see|-|seen acc PA PAtxbv
suchen - gesucht h look_for|looks_for|looked_for acc PA PAt
finden findet gefunden h find|-|found acc PA tA
brauchen - gebraucht h need|-|- acc P tx
haben hat gehabt h have|has|had acc P tA
essen isst gegessen h eat|-|eaten acc PA f
trinken - getrunken h drink|-|drunk acc PA d
kochen - gekocht h cook|-|- acc P f
besuchen - besucht h visit|-|- acc P Pl
verstehen - verstanden h understand|-|understood acc P Pr
bekommen - bekommen h receive|-|- acc P ts
vergessen vergisst vergessen h forget|-|forgotten acc P t
nehmen nimmt genommen h take|-|taken acc P tf
tragen trägt getragen h carry|carries|carried acc P t
öffnen öffnet geöffnet h open|-|- acc P o
schließen - geschlossen h close|-|- acc P o
waschen wäscht gewaschen h wash|-|- acc P cA
malen - gemalt h paint|-|- acc P PAb
bauen - gebaut h build|-|built acc P b
reparieren - repariert h repair|-|- acc P x
lieben - geliebt h love|-|- acc P PA
mögen mag gemocht h like|-|- acc P PAfd
fragen - gefragt h ask|-|- acc P P
kennen - gekannt h know|-|known acc P PAl
treffen trifft getroffen h meet|-|met acc P P
benutzen - benutzt h use|-|- acc P tx
putzen - geputzt h clean|-|- acc P c
füttern - gefüttert h feed|-|fed acc P A
zeichnen zeichnet gezeichnet h draw|-|drawn acc P PAbt
fangen fängt gefangen h catch|catches|caught acc PA A
holen - geholt h fetch|fetches|- acc PA t
verlieren - verloren h lose|-|lost acc P t
an|rufen - angerufen h call|-|- acc P P
ab|holen - abgeholt h pick_up|picks_up|picked_up acc P Pt
an|schauen - angeschaut h look_at|looks_at|looked_at acc PA PAtbl
auf|räumen - aufgeräumt h tidy_up|tidies_up|tidied_up acc P y
ein|laden lädt eingeladen h invite|-|- acc P P
aus|machen - ausgemacht h turn_off|turns_off|turned_off acc P e
an|machen - angemacht h turn_on|turns_on|turned_on acc P e
vor|bereiten - vorbereitet h prepare|-|- acc P f
aus|packen - ausgepackt h unpack|-|- acc P k
ein|packen - eingepackt h pack|-|- acc P k
helfen hilft geholfen h help|-|- dat P PA
danken - gedankt h thank|-|- dat P P
antworten antwortet geantwortet h answer|-|- dat P P
folgen - gefolgt s follow|-|- dat PA PA
glauben - geglaubt h believe|-|- dat P P
zu|hören - zugehört h listen_to|listens_to|listened_to dat PA P
geben gibt gegeben h give|-|given ditr P tf
zeigen - gezeigt h show|-|shown ditr P tr
schicken - geschickt h send|-|sent ditr P s
bringen - gebracht h bring|-|brought ditr P tfd
leihen - geliehen h lend|-|lent ditr P t
erzählen - erzählt h tell|-|told ditr P g
schlafen schläft geschlafen h sleep|-|slept intr PA -
arbeiten arbeitet gearbeitet h work|-|- intr P -
spielen - gespielt h play|-|- intr PA -
warten wartet gewartet h wait|-|- intr PA -
singen - gesungen h sing|-|sung intr PA -
tanzen - getanzt h dance|-|- intr P -
lachen - gelacht h laugh|-|- intr P -
weinen - geweint h cry|cries|cried intr P -
lernen - gelernt h study|studies|studied intr P -
sitzen - gesessen h sit|-|sat intr PA -
ein|kaufen - eingekauft h shop|-|shopped intr P -
auf|stehen - aufgestanden s get_up|gets_up|got_up intr PA -
ein|schlafen schläft eingeschlafen s fall_asleep|falls_asleep|fallen_asleep intr PA -
schwimmen - geschwommen s swim|-|swum loc PA a
wohnen - gewohnt h live|-|- loc PA h
bleiben - geblieben s stay|-|- loc PA l
an|kommen - angekommen s arrive|-|- loc PA l
gehen - gegangen s go|goes|gone dir PA l
fahren fährt gefahren s drive|-|driven dir P l
laufen läuft gelaufen s run|-|run dir PA l
kommen - gekommen s come|-|come dir PA l
warten wartet gewartet h wait_for|waits_for|waited_for prep:auf:acc PA PAv
sprechen spricht gesprochen h talk_to|talks_to|talked_to prep:mit:dat P P
spielen - gespielt h play_with|plays_with|played_with prep:mit:dat PA PAt
"""

# Verbs that take a clause: German, 3sg, participle, English base|3sg|participle.
CLAUSE_VERBS = """
sagen sagt gesagt say|says|said
wissen weiß gewusst know|knows|known
glauben glaubt geglaubt believe|believes|believed
hoffen hofft gehofft hope|hopes|hoped
denken denkt gedacht think|thinks|thought
"""

# Present tense forms: ich, du, er/sie/es, wir, ihr, sie.
IRREGULAR_PRESENT = {
    "sein": ("bin", "bist", "ist", "sind", "seid", "sind"),
    "haben": ("habe", "hast", "hat", "haben", "habt", "haben"),
    "wissen": ("weiß", "weißt", "weiß", "wissen", "wisst", "wissen"),
    "mögen": ("mag", "magst", "mag", "mögen", "mögt", "mögen"),
    "können": ("kann", "kannst", "kann", "können", "könnt", "können"),
    "müssen": ("muss", "musst", "muss", "müssen", "müsst", "müssen"),
    "wollen": ("will", "willst", "will", "wollen", "wollt", "wollen"),
    "dürfen": ("darf", "darfst", "darf", "dürfen", "dürft", "dürfen"),
}

# German modal, English affirmative (3sg, other), negative (3sg, other), question
# auxiliary (3sg, other) and what follows the subject in a question.
MODALS = {
    "können": (("can", "can"), ("cannot", "cannot"), ("can", "can"), ""),
    "müssen": (("must", "must"), ("does not have to", "do not have to"), ("does", "do"), "have to"),
    "wollen": (
        ("wants to", "want to"),
        ("does not want to", "do not want to"),
        ("does", "do"),
        "want to",
    ),
    "dürfen": (("may", "may"), ("may not", "may not"), ("may", "may"), ""),
}

NUMBERS = [
    ("zwei", "two"),
    ("drei", "three"),
    ("vier", "four"),
    ("fünf", "five"),
    ("sechs", "six"),
    ("sieben", "seven"),
    ("acht", "eight"),
    ("neun", "nine"),
    ("zehn", "ten"),
    ("elf", "eleven"),
    ("zwölf", "twelve"),
    ("zwanzig", "twenty"),
]

TIME_ADVERBS = [("heute", "today"), ("jetzt", "now")]
QUESTION_WORDS = [("warum", "why"), ("wann", "when")]
SUBORDINATORS = [("weil", "because"), ("obwohl", "although"), ("wenn", "if")]

# Pronouns: key, German nominative/accusative/dative, English subject/object,
# person, plural.  'her' and 'them' exist only as dative objects because German
# 'sie' would be ambiguous as an accusative object.
PRONOUNS = {
    "1s": ("ich", "mich", "mir", "I", "me", 1, False),
    "2s": ("du", "dich", "dir", "you", "you", 2, False),
    "3m": ("er", "ihn", "ihm", "he", "him", 3, False),
    "3f": ("sie", None, "ihr", "she", "her", 3, False),
    "1p": ("wir", "uns", "uns", "we", "us", 1, True),
    "3p": ("sie", None, "ihnen", "they", "them", 3, True),
}

# Possessive stems: German, English.
POSSESSIVES = [("mein", "my"), ("dein", "your"), ("sein", "his"), ("ihr", "her"), ("unser", "our")]


@dataclass(frozen=True)
class Noun:
    """A noun with its German gender, forms and English forms."""

    gender: str
    de: str
    de_pl: str | None
    de_obl: str
    en: str
    en_pl: str | None
    tags: str
    place: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class Adjective:
    """An adjective with the noun classes it may describe."""

    de: str
    en: str
    classes: str
    stem: str


@dataclass(frozen=True)
class Verb:
    """A verb with German and English forms and its argument frame."""

    inf: str
    prefix: str
    de_3sg: str | None
    participle: str
    aux: str
    en: tuple[str, str, str]
    frame: str
    subj: str
    obj: str
    prep: tuple[str, str] | None = field(default=None)


def en_plural(word: str) -> str:
    """Return the regular English plural of word."""
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def parse_nouns(text: str = NOUNS) -> list[Noun]:
    """Parse the noun table."""
    nouns = []
    for line in text.strip().splitlines():
        parts = line.split()
        gender, de_forms, en_forms, tags = parts[:4]
        de = de_forms.split("/")
        en = en_forms.replace("_", " ").split("/")
        de_pl = None if de[1] == "-" else de[1]
        en_pl = None if de_pl is None else (en[1] if len(en) > 1 else en_plural(en[0]))
        place = tuple(parts[4].split(",")) if len(parts) > 4 else None
        obl = de[2] if len(de) > 2 else de[0]
        nouns.append(Noun(gender, de[0], de_pl, obl, en[0], en_pl, tags, place))
    return nouns


def parse_adjectives(text: str = ADJECTIVES) -> list[Adjective]:
    """Parse the adjective table."""
    adjs = []
    for line in text.strip().splitlines():
        parts = line.split()
        stem = parts[3] if len(parts) > 3 else parts[0]
        adjs.append(Adjective(parts[0], parts[1], parts[2], stem))
    return adjs


def en_third(base: str) -> str:
    """Return the English third person singular of a regular verb."""
    head, _, rest = base.partition(" ")
    if head.endswith(("s", "x", "z", "ch", "sh", "o")):
        head += "es"
    elif head.endswith("y") and head[-2] not in "aeiou":
        head = head[:-1] + "ies"
    else:
        head += "s"
    return f"{head} {rest}".strip()


def en_past(base: str) -> str:
    """Return the English participle of a regular verb."""
    head, _, rest = base.partition(" ")
    if head.endswith("e"):
        head += "d"
    elif head.endswith("y") and head[-2] not in "aeiou":
        head = head[:-1] + "ied"
    else:
        head += "ed"
    return f"{head} {rest}".strip()


def parse_verbs(text: str = VERBS) -> list[Verb]:
    """Parse the verb table."""
    verbs = []
    for line in text.strip().splitlines():
        inf, third, part, aux, en, frame, subj, obj = line.split()
        prefix, _, base = inf.rpartition("|")
        base_en, third_en, part_en = en.replace("_", " ").split("|")
        english = (
            base_en,
            en_third(base_en) if third_en == "-" else third_en,
            en_past(base_en) if part_en == "-" else part_en,
        )
        prep = None
        if frame.startswith("prep:"):
            _, p, case = frame.split(":")
            frame, prep = "prep", (p, case)
        verbs.append(
            Verb(
                base,
                prefix,
                None if third == "-" else third,
                part,
                aux,
                english,
                frame,
                subj,
                "" if obj == "-" else obj,
                prep,
            )
        )
    return verbs


def parse_clause_verbs(text: str = CLAUSE_VERBS) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """Parse the clause-taking verbs."""
    rows = []
    for line in text.strip().splitlines():
        inf, third, part, en = line.split()
        rows.append((inf, third, part, tuple(en.split("|"))))
    return rows
