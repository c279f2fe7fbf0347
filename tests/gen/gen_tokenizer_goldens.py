#!/usr/bin/env python3
"""Builds the tokenizer parity corpus and goldens with the `tokenizers` package.

    python3 tests/gen/gen_tokenizer_goldens.py [--corpus-only]

Writes, under tests/goldens/tokenizer/:
  corpus.jsonl            {"text": ...} lines (deterministic: fixed seeds)
  tiny_*/tokenizer.json   small tokenizers trained here that exercise the
                          components the real ones do not use
  <name>.jsonl.gz         per corpus line: {"ids": encode(add_special=True),
                          "ids_plain": encode(add_special=False)}, then per
                          decode case: {"dec_ids": [...], "text": ..., "text_skip": ...}
The real tokenizers are read from ../shared relative to the repository root.
"""
import gzip, json, os, random, sys, sysconfig, unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "goldens", "tokenizer")
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
REAL = {
    "qwen3": os.path.join(SHARED, "fixtures/tokenizers/qwen3"),
    "gemma3": os.path.join(SHARED, "fixtures/tokenizers/gemma3"),
    "llama3": os.path.join(SHARED, "fixtures/tokenizers/llama3"),
    "demo": os.path.join(SHARED, "models/tern-demo-code-17m"),
}
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
            "</tool_call>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<pad>", "<unk>",
            "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
            "<|end_header_id|>", "<s>", "</s>", "[CLS]", "[SEP]", "<mask>", "<sep>"]


def scripts():
    """Letters grouped by the first word of their Unicode name (one group per script)."""
    groups = {}
    for cp in range(0x20, 0x30000):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat[0] not in "LMN":
            continue
        name = unicodedata.name(ch, "")
        if not name:
            continue
        key = name.split()[0]
        if key in ("CJK", "HANGUL") and len(groups.get(key, [])) > 3000:
            continue
        groups.setdefault(key, []).append(ch)
    return groups


def emoji(rng):
    base = [chr(c) for c in list(range(0x1F600, 0x1F64F)) + list(range(0x1F44A, 0x1F450)) +
            list(range(0x1F466, 0x1F46A)) + [0x2764, 0x1F44D, 0x1F9D1, 0x1F3F3, 0x1F308, 0x1F680]]
    tones = [chr(c) for c in range(0x1F3FB, 0x1F400)]
    zwj = ["\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466", "\U0001F3F3\uFE0F\u200D\U0001F308",
           "\U0001F469\U0001F3FD\u200D\U0001F4BB", "\U0001F9D1\U0001F3FF\u200D\U0001F91D\u200D\U0001F9D1\U0001F3FB",
           "\u2764\uFE0F\u200D\U0001F525", "\U0001F441\uFE0F\u200D\U0001F5E8\uFE0F", "1\uFE0F\u20E3", "#\uFE0F\u20E3",
           "\U0001F1EB\U0001F1F7", "\U0001F1EF\U0001F1F5", "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F"]
    out = []
    for _ in range(120):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.3:
                parts.append(rng.choice(base) + rng.choice(tones))
            elif r < 0.6:
                parts.append(rng.choice(zwj))
            else:
                parts.append(rng.choice(base))
            parts.append(rng.choice(["", " ", "  ", "\n", "a", "ok "]))
        out.append("".join(parts))
    return out


def build_corpus():
    rng = random.Random(20261129)
    lines = []
    add = lines.append
    groups = scripts()
    for key in sorted(groups):
        chars = groups[key]
        for _ in range(6 if len(chars) > 20 else 2):
            words = ["".join(rng.choice(chars) for _ in range(rng.randint(1, 9))) for _ in range(rng.randint(3, 14))]
            seps = [" ", " ", " ", ", ", ". ", "\n", "  ", "\t", "-", "'s ", "!"]
            add("".join(w + rng.choice(seps) for w in words).strip(" "))
    real = [
        "The quick brown fox jumps over the lazy dog. It's what they'd've done; we'll see, I'm sure.",
        "DON'T SHOUT! He'S here, THEY'LL come. ſ long s and K kelvin and Å angstrom.",
        "Ça va? Où est la bibliothèque? Größe, Straße, naïve café, coöperate, façade.",
        "Привет, как дела? Съешь же ещё этих мягких французских булок.",
        "Γειά σου Κόσμε! Ὀδυσσεύς, σοφός; ΣΊΣΥΦΟΣ",
        "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣٤٥ وتشكيل: بِسْمِ اللَّهِ",
        "שלום עולם! זה טקסט בעברית עם ניקוד: בְּרֵאשִׁית",
        "नमस्ते दुनिया! हिन्दी पाठ। ক্ষুদ্র বাংলা লেখা। தமிழ் உரை. తెలుగు. ಕನ್ನಡ. മലയാളം. ગુજરાતી. ਪੰਜਾਬੀ.",
        "ภาษาไทยไม่มีช่องว่างระหว่างคำ ພາສາລາວ ភាសាខ្មែរ မြန်မာဘာသာ",
        "你好，世界！这是一个中文句子，包含标点符号。我们今天去北京大学吃烤鸭。",
        "こんにちは世界！カタカナとひらがなと漢字が混ざった文章です。ｶﾀｶﾅ半角も。",
        "안녕하세요 세계! 한국어 문장입니다. 한글 자모: ᄀᄁᄂ ㄱㄴㄷ",
        "ትግርኛ አማርኛ ᐃᓄᒃᑎᑐᑦ ᏣᎳᎩ ꦧꦱꦗꦮ ܐܪܡܝܐ ދިވެހި ⵜⴰⵎⴰⵣⵉⵖⵜ",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒮𝒸𝓇𝒾𝓅𝓉 ① ⅻ ² ½ ﬁ ﬂ ＦＵＬＬＷＩＤＴＨ １２３",
        "e\u0301 a\u0308 o\u0302\u0323 \u1100\u1161\u11a8 A\u030a \u212b \u2126 q\u0307\u0323 \u0915\u093c",
        "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334L\u0489G\u0489O",
        "tabs\tand\t\tmore\t\t\ttabs\u00a0nbsp\u3000ideographic\u2003em\u2009thin\u202fnarrow\u205fmath\u180emongol",
        "line1\nline2\r\nline3\rline4\n\rline5\r\r\n\n\nline6\u2028ls\u2029ps\u0085nel\x0bvt\x0cff",
        "ctrl:\x00\x01\x02\x03\x07\x08\x1b[31mred\x1b[0m\x7f\x1f end",
        "https://example.com/path/to/page?query=1&lang=en#frag http://user:pw@host:8080/a%20b mailto:me@x.org",
        "C:\\Users\\name\\file.txt /usr/local/bin/python3 ~/.config/tern/settings.json ../shared/models",
        "3.14159 2.71828 1,000,000 1e-10 -42 +7 0x1F 0b1010 0o777 12345678901234567890 3/4 50% $19.99 €5 ¥1000",
        "Phone: +1 (555) 123-4567, ISBN 978-3-16-148410-0, date 2026-11-29T09:18:05Z, v1.2.3-rc.4",
        "١٢٣٤٥٦٧٨٩٠ ۱۲۳ ०१२३ ๑๒๓ 一二三 ①②③ ⅠⅡⅢ ½¼¾ ¹²³",
    ]
    for s in real:
        add(s)
    add("new scripts: \U00031350\U00031351\U0002EBF0 \U00011F04\U00011F05 \U000105C0\U000105C1 "
        "\U00010D4A\U00010D70 \u1C89\u1C8A \uA7CB\uA7CC \U0001D2C0\U0001D2C1 \U00016D43 \u0897x")
    add("a" * 3000); add(" " * 2000); add("\n" * 600); add("ab" * 1500); add("\U0001F600" * 300)
    add("=-" * 800); add("1" * 1500); add("\t" * 400 + "x"); add("Ha" * 500 + "!"); add("▁" * 300)
    add(" \n" * 300); add("\r\n" * 300); add("'s" * 300); add("x " * 1000); add("é" * 800)
    add("na" * 200 + " Batman!"); add("\u0301" * 100); add("<|im_start|>" * 50); add("<0x41>" * 20)
    for e in emoji(rng):
        add(e)
    # special tokens embedded in text
    for _ in range(150):
        parts = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.4:
                parts.append(rng.choice(SPECIALS))
            elif r < 0.5:
                t = rng.choice(SPECIALS)
                parts.append(t[:rng.randint(1, len(t) - 1)])
            else:
                parts.append(rng.choice(["user", "\n", " ", "hello world", "  spaced ", "assistant\n",
                                         "x", "\n\n", "Hi!", "<", ">", "|", "<<", ">>", " <", "> "]))
        add("".join(parts))
    add("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>")
    add("<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>")
    add("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>")
    # added-token flags of the tiny tokenizers: lstrip, rstrip, single_word, normalized
    for s in ["a [LS] b", "x   [LS]", "[LS]", "  [LS]  [LS]", "[RS]   y", "q [RS]\n\tz", "[RS][RS] [LS][LS]",
              "the word is", "swordfish word, words word_ word1 (word) word", "word", " word ",
              "<mask>  z  <mask>", " <mask> ", "hello world", "Hello World hello  world", " tab\ttab  tab",
              "<sep> x<sep>y <sep>", "Hello", "sayHello Hello!"]:
        add(s)
    # source code
    libdir = sysconfig.get_paths()["stdlib"]
    for mod in ["textwrap.py", "json/encoder.py", "colorsys.py", "bisect.py", "fnmatch.py"]:
        p = os.path.join(libdir, mod)
        if os.path.exists(p):
            src = open(p, encoding="utf-8").read()
            for k in range(0, min(len(src), 12000), 1500):
                add(src[k:k + 1500])
    add('#include <stdio.h>\nint main(void) {\n\tfor (int i = 0; i < 10; i++) printf("%d\\n", i);\n\treturn 0;\n}\n')
    add("fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); println!(\"{:?}\", v); }")
    add("SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;")
    add("<html><body><div class=\"a\">Hello &amp; <b>world</b></div></body></html>")
    add('{"key": [1, 2.5, null, true], "nested": {"a": "b\\"c"}}')
    # random code points and random bytes
    for _ in range(250):
        n = rng.randint(1, 60)
        s = []
        while len(s) < n:
            cp = rng.choice([rng.randint(0x20, 0x7F), rng.randint(0x80, 0x7FF), rng.randint(0x800, 0xFFFF),
                             rng.randint(0x10000, 0x2FFFF), rng.randint(0, 0x10FFFF)])
            if 0xD800 <= cp <= 0xDFFF:
                continue
            s.append(chr(cp))
        add("".join(s))
    for _ in range(250):
        b = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 80)))
        add(b.decode("utf-8", "replace"))
    for _ in range(600):
        words = [rng.choice(["the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on",
                             "are", "as", "with", "his", "they", "I", "at", "be", "this", "have", "from",
                             "Hello", "World", "don't", "isn't", "CamelCase", "snake_case", "x2", "3D", "e-mail"])
                 for _ in range(rng.randint(5, 40))]
        add(" ".join(words))
    add("")
    add(" ")
    return lines


def tiny_tokenizers(lines):
    """Small tokenizers trained on the corpus, one per component family."""
    from tokenizers import Tokenizer, models, normalizers as N, pre_tokenizers as P, decoders as D, processors as R
    from tokenizers import trainers, AddedToken, Regex
    text = [l for l in lines if len(l) < 2000]
    made = {}

    # SentencePiece style (Llama 2): Prepend + Replace, byte fallback, Strip decoder, <s> template.
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.normalizer = N.Sequence([N.Prepend("▁"), N.Replace(" ", "▁")])
    t.decoder = D.Sequence([D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(" ", 1, 0)])
    tr = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"],
                             initial_alphabet=[f"<0x{b:02X}>" for b in range(256)], show_progress=False)
    t.train_from_iterator(text[:400], tr)
    j = json.loads(t.to_str())
    v = j["model"]["vocab"]
    for b in range(256):
        v.setdefault(f"<0x{b:02X}>", len(v))
    t = Tokenizer.from_str(json.dumps(j))
    t.post_processor = R.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    t.add_tokens([AddedToken("[LS]", lstrip=True), AddedToken("[RS]", rstrip=True),
                  AddedToken("word", single_word=True), AddedToken("Hello", normalized=True)])
    t.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True)])
    made["tiny_sp"] = t

    # WordPiece-like BPE: NFKC + Lowercase + Strip, Digits/Punctuation/Whitespace, ## prefix, </w> suffix.
    t = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    t.normalizer = N.Sequence([N.NFKC(), N.Lowercase(), N.Strip()])
    t.pre_tokenizer = P.Sequence([P.Whitespace(), P.Digits(individual_digits=True), P.Punctuation()])
    t.decoder = D.BPEDecoder(suffix="</w>")
    tr = trainers.BpeTrainer(vocab_size=900, special_tokens=["[UNK]", "[CLS]", "[SEP]"], continuing_subword_prefix="##",
                             end_of_word_suffix="</w>", show_progress=False)
    t.train_from_iterator(text[:400], tr)
    t.post_processor = R.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))
    made["tiny_wp"] = t

    # Metaspace pre-tokenizer + decoder, NFD, WhitespaceSplit, Split with invert/Contiguous.
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.normalizer = N.NFD()
    t.pre_tokenizer = P.Sequence([P.Split(" ", "merged_with_previous"), P.Metaspace(prepend_scheme="first"),
                                  P.Split(Regex(r"\d+"), "contiguous", invert=True),
                                  P.Digits(individual_digits=False)])
    t.decoder = D.Metaspace(prepend_scheme="first")
    tr = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<sep>"], show_progress=False)
    t.train_from_iterator(text[:400], tr)
    made["tiny_meta"] = t

    # ByteLevel with add_prefix_space and its regex, NFKD, Roberta post-processor, normalized added token.
    t = Tokenizer(models.BPE())
    t.normalizer = N.Sequence([N.NFKD(), N.Replace(Regex(r"\d{3,}"), "#")])
    t.pre_tokenizer = P.ByteLevel(add_prefix_space=True, use_regex=True)
    t.decoder = D.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=800, special_tokens=["<s>", "</s>"], initial_alphabet=P.ByteLevel.alphabet(),
                             show_progress=False)
    t.train_from_iterator(text[:400], tr)
    t.post_processor = R.RobertaProcessing(("</s>", 1), ("<s>", 0))
    t.add_tokens([AddedToken("hello world", normalized=True), AddedToken(" tab", normalized=False)])
    made["tiny_bl"] = t
    return made


def decode_cases(tok, rng, n_ids):
    """Random id sequences: byte tokens, specials and ordinary pieces mixed."""
    vocab = tok.get_vocab(with_added_tokens=True)
    bytes_ids = [i for s, i in vocab.items() if len(s) == 6 and s.startswith("<0x")]
    special = [i for i, a in tok.get_added_tokens_decoder().items() if a.special]
    out = []
    for k in range(300):
        seq = []
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            if bytes_ids and r < 0.35:
                seq.append(rng.choice(bytes_ids))
            elif special and r < 0.45:
                seq.append(rng.choice(special))
            else:
                seq.append(rng.randrange(n_ids))
        out.append(seq)
    return out


def main():
    lines = build_corpus()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for l in lines:
            f.write(json.dumps({"text": l}, ensure_ascii=False) + "\n")
    print(f"corpus: {len(lines)} lines, {sum(len(l.encode()) for l in lines)} bytes")
    if "--corpus-only" in sys.argv:
        return
    from tokenizers import Tokenizer
    toks = {}
    for name, d in REAL.items():
        toks[name] = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    for name, t in tiny_tokenizers(lines).items():
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        t.save(os.path.join(d, "tokenizer.json"))
        toks[name] = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    for name, tok in toks.items():
        rng = random.Random(sum(map(ord, name)))
        rows = []
        for l in lines:
            a = tok.encode(l, add_special_tokens=True).ids
            b = tok.encode(l, add_special_tokens=False).ids
            rows.append({"ids": a, "ids_plain": b})
        cases = [r["ids"] for r in rows] + decode_cases(tok, rng, tok.get_vocab_size(with_added_tokens=True))
        for ids in cases:
            rows.append({"dec_ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                         "text_skip": tok.decode(ids, skip_special_tokens=True)})
        p = os.path.join(OUT, f"{name}.jsonl.gz")
        with gzip.GzipFile(p, "wb", mtime=0) as f:
            for r in rows:
                f.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"))
        print(f"{name}: {os.path.getsize(p)} bytes")


if __name__ == "__main__":
    main()
