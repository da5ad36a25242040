"""Language codes: a model's own codes made the public ones, and English names.

The public code of a language is its ISO 639-1 code where one exists (`deu_Latn` and
`<2de>` are `de`), else its ISO 639-3 code; a script is kept only where a model offers
the language in more than one (`zh_Hans`, `zh_Hant`). Pair names join two public codes
with `-`, so a script or region is written with `_`.
"""

from __future__ import annotations

from collections.abc import Iterable

_ISO3_TO_1 = (
    "aar aa|abk ab|afr af|aka ak|amh am|ara ar|arb ar|arg an|asm as|ava av|aym ay|ayr ay|"
    "aze az|azj az|bak ba|bam bm|bel be|ben bn|bis bi|bod bo|bos bs|bre br|bul bg|cat ca|"
    "ces cs|cha ch|che ce|chv cv|cor kw|cos co|cre cr|cym cy|dan da|deu de|div dv|dzo dz|"
    "ell el|eng en|epo eo|est et|ekk et|eus eu|ewe ee|fao fo|fas fa|pes fa|fij fj|fin fi|"
    "fra fr|fry fy|ful ff|fuv ff|gla gd|gle ga|glg gl|glv gv|grn gn|guj gu|hat ht|hau ha|"
    "heb he|her hz|hin hi|hmo ho|hrv hr|hun hu|hye hy|ibo ig|ido io|iii ii|iku iu|ile ie|"
    "ina ia|ind id|ipk ik|isl is|ita it|jav jv|jpn ja|kal kl|kan kn|kas ks|kat ka|kau kr|"
    "kaz kk|khm km|kik ki|kin rw|kir ky|kom kv|kon kg|kor ko|kua kj|kur ku|kmr ku|lao lo|"
    "lat la|lav lv|lvs lv|lim li|lin ln|lit lt|ltz lb|lub lu|lug lg|mah mh|mal ml|mar mr|"
    "mkd mk|mlg mg|plt mg|mlt mt|mon mn|khk mn|mri mi|msa ms|zsm ms|mya my|nau na|nav nv|"
    "nbl nr|nde nd|ndo ng|nep ne|npi ne|nld nl|nno nn|nob nb|nor no|nya ny|oci oc|oji oj|"
    "ori or|ory or|orm om|gaz om|oss os|pan pa|pli pi|pol pl|por pt|pus ps|pbt ps|que qu|"
    "quy qu|roh rm|ron ro|run rn|rus ru|sag sg|san sa|sin si|slk sk|slv sl|sme se|smo sm|"
    "sna sn|snd sd|som so|sot st|spa es|sqi sq|als sq|srd sc|srp sr|ssw ss|sun su|swa sw|"
    "swh sw|swe sv|tah ty|tam ta|tat tt|tel te|tgk tg|tgl tl|tha th|tir ti|ton to|tsn tn|"
    "tso ts|tuk tk|tur tr|twi tw|uig ug|ukr uk|urd ur|uzb uz|uzn uz|ven ve|vie vi|vol vo|"
    "wln wa|wol wo|xho xh|yid yi|ydd yi|yor yo|zha za|zho zh|zul zu"
)
ISO3_TO_1 = dict(entry.split(" ") for entry in _ISO3_TO_1.split("|"))
"""ISO 639-3 (and the individual languages models use for a macrolanguage: `arb`, `zsm`,
`pes`) -> ISO 639-1."""

_NAMES = (
    "af Afrikaans|am Amharic|ar Arabic|as Assamese|ast Asturian|az Azerbaijani|"
    "ba Bashkir|be Belarusian|bg Bulgarian|bm Bambara|bn Bengali|bo Tibetan|bs Bosnian|"
    "ca Catalan|ceb Cebuano|ckb Central Kurdish|cs Czech|cy Welsh|da Danish|de German|"
    "dz Dzongkha|ee Ewe|el Greek|en English|eo Esperanto|es Spanish|et Estonian|"
    "eu Basque|fa Persian|ff Fula|fi Finnish|fj Fijian|fo Faroese|fr French|fur Friulian|"
    "ga Irish|gd Scottish Gaelic|gl Galician|gn Guarani|gu Gujarati|ha Hausa|he Hebrew|"
    "hi Hindi|hr Croatian|ht Haitian Creole|hu Hungarian|hy Armenian|id Indonesian|"
    "ig Igbo|ilo Ilocano|is Icelandic|it Italian|ja Japanese|jv Javanese|ka Georgian|"
    "kab Kabyle|kk Kazakh|km Khmer|kn Kannada|ko Korean|ks Kashmiri|ku Kurdish|"
    "ky Kyrgyz|la Latin|lb Luxembourgish|lg Ganda|li Limburgish|ln Lingala|lo Lao|"
    "lt Lithuanian|lv Latvian|mai Maithili|mg Malagasy|mi Maori|mk Macedonian|"
    "ml Malayalam|mn Mongolian|mr Marathi|ms Malay|mt Maltese|my Burmese|nb Norwegian "
    "Bokmål|ne Nepali|nl Dutch|nn Norwegian Nynorsk|no Norwegian|ny Nyanja|oc Occitan|"
    "om Oromo|or Odia|pa Punjabi|pl Polish|ps Pashto|pt Portuguese|qu Quechua|"
    "ro Romanian|ru Russian|rw Kinyarwanda|sa Sanskrit|sc Sardinian|sd Sindhi|"
    "si Sinhala|sk Slovak|sl Slovenian|sm Samoan|sn Shona|so Somali|sq Albanian|"
    "sr Serbian|ss Swati|st Southern Sotho|su Sundanese|sv Swedish|sw Swahili|ta Tamil|"
    "te Telugu|tg Tajik|th Thai|ti Tigrinya|tk Turkmen|tl Tagalog|tn Tswana|tr Turkish|"
    "ts Tsonga|tt Tatar|tw Twi|ug Uyghur|uk Ukrainian|ur Urdu|uz Uzbek|vi Vietnamese|"
    "wo Wolof|xh Xhosa|yi Yiddish|yo Yoruba|yue Cantonese|zh Chinese|"
    "zh_hans Chinese (Simplified)|zh_hant Chinese (Traditional)|pt_br Portuguese (Brazil)|"
    "zu Zulu"
)
NAMES = dict(entry.split(" ", 1) for entry in _NAMES.split("|"))
"""English names of languages by lower-case public code (a code not here is its own name)."""


def name(code: str) -> str:
    """Return a language's English name (the code itself when the table lacks it)."""
    low = code.lower()
    return NAMES.get(low) or NAMES.get(low.split("_", 1)[0]) or code


def base_code(native: str) -> tuple[str, str]:
    """Return (ISO code, script or region) of a model's code: `deu_Latn` -> (`de`, `Latn`).

    Accepts FLORES-200 codes (`zho_Hant`), MADLAD's `<2de>`, and plain codes (`de`,
    `pt_BR`, `zh-Hans`).
    """
    code = native.strip()
    if code.startswith("<2") and code.endswith(">"):
        code = code[2:-1]
    head, _, tail = code.replace("-", "_").partition("_")
    head = head.lower()
    return ISO3_TO_1.get(head, head), tail


def public_codes(natives: Iterable[str]) -> dict[str, str]:
    """Return native code -> public code for all the codes one model offers.

    A script or region is kept only when the model offers the same language under more
    than one of them; otherwise two codes that would collide keep their native form.
    """
    natives = list(dict.fromkeys(natives))
    split = {native: base_code(native) for native in natives}
    variants: dict[str, set[str]] = {}
    for base, tail in split.values():
        variants.setdefault(base, set()).add(tail)
    out: dict[str, str] = {}
    for native, (base, tail) in split.items():
        code = f"{base}_{tail}" if tail and len(variants[base]) > 1 else base
        out[native] = code
    taken: dict[str, int] = {}
    for code in out.values():
        taken[code] = taken.get(code, 0) + 1
    return {n: (c if taken[c] == 1 else n) for n, c in out.items()}
