#include "grammar/json_prelude.h"

#include <algorithm>

namespace mkserve::grammar {
namespace {

using Seq = std::vector<Element>;

ByteSet Range(unsigned char first, unsigned char last) {
  ByteSet set;
  for (int b = first; b <= last; ++b) set.set(b);
  return set;
}

ByteSet Chars(std::string_view chars) {
  ByteSet set;
  for (char c : chars) set.set(static_cast<unsigned char>(c));
  return set;
}

Seq Join(std::initializer_list<Seq> parts) {
  Seq out;
  for (const Seq& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

class PreludeWriter {
 public:
  explicit PreludeWriter(Grammar& g) : g_(g) {}

  Element Set(const ByteSet& set) { return Element::Bytes(g_.Intern(set)); }
  Element Rule(int32_t rule) { return Element::Rule(rule); }
  Seq Lit(std::string_view text) { return g_.Literal(text); }
  int32_t Alternatives(std::initializer_list<Seq> alternatives) { return g_.RuleOf(alternatives); }
  int32_t Rep(const Seq& item, int min, int max) { return Repeat(g_, item, min, max); }
  // Any number of rounds, each one of `rounds`: a loop rule (empty, or a round and the loop again).
  int32_t Loop(const std::vector<Seq>& rounds) {
    const int32_t loop = g_.NewRule();
    g_.AddAlternative(loop, {});
    for (const Seq& round : rounds) g_.AddAlternative(loop, Join({round, {Rule(loop)}}));
    return loop;
  }

  JsonRules Write() {
    JsonRules r;
    const Element digit = Set(Range('0', '9'));
    const Element hex = Set(Range('0', '9') | Range('a', 'f') | Range('A', 'F'));
    r.text = Rep({Set(ByteSet().set())}, 0, -1);
    r.ws = Rep({Set(Chars(" \t\n\r"))}, 0, kMaxWhitespaceBytes);

    // String content: printable ASCII but quote and backslash, escapes, and well-formed UTF-8.
    // A \u escape is a code point: any but a surrogate, or a high and a low surrogate together
    // (a lone one is text strict parsers refuse: nlohmann, serde_json). Each alternative is one
    // character as JSON Schema counts them, so the same loop counts lengths (code_points).
    const Element cont = Set(Range(0x80, 0xbf));
    ByteSet plain = Range(0x20, 0x7f);
    plain.reset('"');
    plain.reset('\\');
    const Element not_d = Set(Range('0', '9') | Range('a', 'c') | Range('e', 'f') |
                              Range('A', 'C') | Range('E', 'F'));
    const Element d = Set(Chars("dD"));
    const Element u = Set(Chars("u")), backslash = Set(Chars("\\"));
    // The characters are alternatives of the loop rule itself (not a rule of their own), so the
    // token cache of a character position covers whole runs of characters, not one.
    const std::vector<Seq> character = {
        {Set(plain)},
        {backslash, Set(Chars("\"\\/bfnrt"))},
        {backslash, u, not_d, hex, hex, hex},
        {backslash, u, d, Set(Range('0', '7')), hex, hex},
        {backslash, u, d, Set(Chars("89abAB")), hex, hex, backslash, u, d, Set(Chars("cdefCDEF")),
         hex, hex},
        {Set(Range(0xc2, 0xdf)), cont},
        {Set(Chars("\xe0")), Set(Range(0xa0, 0xbf)), cont},
        {Set(Range(0xe1, 0xec) | Range(0xee, 0xef)), cont, cont},
        {Set(Chars("\xed")), Set(Range(0x80, 0x9f)), cont},
        {Set(Chars("\xf0")), Set(Range(0x90, 0xbf)), cont, cont},
        {Set(Range(0xf1, 0xf3)), cont, cont, cont},
        {Set(Chars("\xf4")), Set(Range(0x80, 0x8f)), cont, cont},
    };
    const int32_t characters = Loop(character);
    r.characters = characters;
    r.string = Alternatives({Join({Lit("\""), {Rule(characters)}, Lit("\"")})});
    // At least one character (minLength 1): the same alternatives, each on into the loop. Here
    // in the prelude its token caches are built once per server, not once per request.
    const int32_t some = g_.NewRule();
    for (const Seq& alternative : character) {
      g_.AddAlternative(some, Join({alternative, {Rule(characters)}}));
    }
    r.nonempty_string = Alternatives({Join({Lit("\""), {Rule(some)}, Lit("\"")})});
    r.code_points = characters;
    r.code_points_probe = g_.Counted(r.code_points, 0, kMaxLoopRounds).value;

    const int32_t more_digits = Rep({digit}, 0, kMaxIntegerDigits - 1);
    r.integer = Alternatives({
        {Set(Chars("-")), Set(Range('0', '9'))},  // -0 is valid JSON
        {Set(Chars("-")), Set(Range('1', '9')), Rule(more_digits)},
        {Set(Range('0', '9'))},
        {Set(Range('1', '9')), Rule(more_digits)},
    });
    const int32_t fraction =
        Alternatives({{}, {Set(Chars(".")), Rule(Rep({digit}, 1, kMaxFractionDigits))}});
    const int32_t exponent = Alternatives(
        {{},
         {Set(Chars("eE")), Rule(Rep({digit}, 1, kMaxExponentDigits))},
         {Set(Chars("eE")), Set(Chars("+-")), Rule(Rep({digit}, 1, kMaxExponentDigits))}});
    r.number = Alternatives({{Rule(r.integer), Rule(fraction), Rule(exponent)}});
    r.boolean = Alternatives({Lit("true"), Lit("false")});
    r.null = Alternatives({Lit("null")});

    // value, object and array refer to each other: make the rules first.
    r.value = g_.NewRule();
    r.object = g_.NewRule();
    r.array = g_.NewRule();
    for (int32_t rule : {r.object, r.array, r.string, r.number, r.boolean, r.null}) {
      g_.AddAlternative(r.value, {Rule(rule)});
    }
    const Element ws = Rule(r.ws);
    const int32_t member =
        Alternatives({Join({{Rule(r.string), ws}, Lit(":"), {ws, Rule(r.value)}})});
    const int32_t object_more = g_.NewRule();
    g_.AddAlternative(object_more, Lit("}"));
    g_.AddAlternative(object_more, Join({Lit(","), {ws, Rule(member), ws, Rule(object_more)}}));
    g_.AddAlternative(r.object, Join({Lit("{"), {ws}, Lit("}")}));
    g_.AddAlternative(r.object, Join({Lit("{"), {ws, Rule(member), ws, Rule(object_more)}}));
    const int32_t array_more = g_.NewRule();
    g_.AddAlternative(array_more, Lit("]"));
    g_.AddAlternative(array_more, Join({Lit(","), {ws, Rule(r.value), ws, Rule(array_more)}}));
    g_.AddAlternative(r.array, Join({Lit("["), {ws}, Lit("]")}));
    g_.AddAlternative(r.array, Join({Lit("["), {ws, Rule(r.value), ws, Rule(array_more)}}));

    WriteFormats(r, digit, hex);
    return r;
  }

 private:
  void WriteFormats(JsonRules& r, Element digit, Element hex) {
    const Element quote = Set(Chars("\""));
    const int32_t month = Alternatives(
        {{Set(Chars("0")), Set(Range('1', '9'))}, {Set(Chars("1")), Set(Range('0', '2'))}});
    const int32_t day = Alternatives({{Set(Chars("0")), Set(Range('1', '9'))},
                                      {Set(Chars("12")), digit},
                                      {Set(Chars("3")), Set(Chars("01"))}});
    const int32_t hour =
        Alternatives({{Set(Chars("01")), digit}, {Set(Chars("2")), Set(Range('0', '3'))}});
    const Element sixty = Set(Range('0', '5'));
    const int32_t date = Alternatives(
        {Join({{digit, digit, digit, digit}, Lit("-"), {Rule(month)}, Lit("-"), {Rule(day)}})});
    const int32_t fraction = Alternatives({{}, {Set(Chars(".")), Rule(Rep({digit}, 1, 9))}});
    const int32_t offset =
        Alternatives({Lit("Z"), Join({{Set(Chars("+-")), Rule(hour)}, Lit(":"), {sixty, digit}})});
    const int32_t time = Alternatives({Join({{Rule(hour)},
                                             Lit(":"),
                                             {sixty, digit},
                                             Lit(":"),
                                             {sixty, digit, Rule(fraction), Rule(offset)}})});
    r.date = Alternatives({{quote, Rule(date), quote}});
    r.time = Alternatives({{quote, Rule(time), quote}});
    r.date_time = Alternatives({Join({{quote, Rule(date)}, Lit("T"), {Rule(time), quote}})});

    // local@domain.tld: dot-separated atoms of the common address characters; a domain label
    // (RFC 1123) is 1-63 letters, digits and hyphens with a letter or digit at each end.
    const Element atom_char =
        Set(Range('a', 'z') | Range('A', 'Z') | Range('0', '9') | Chars("!#$%&'*+/=?^_`{|}~-"));
    const Element alnum = Set(Range('a', 'z') | Range('A', 'Z') | Range('0', '9'));
    const Element label_char =
        Set(Range('a', 'z') | Range('A', 'Z') | Range('0', '9') | Chars("-"));
    const int32_t atom = Rep({atom_char}, 1, 64);
    const int32_t label = Alternatives({{alnum}, {alnum, Rule(Rep({label_char}, 0, 61)), alnum}});
    const int32_t local =
        Alternatives({{Rule(atom), Rule(Rep(Join({Lit("."), {Rule(atom)}}), 0, -1))}});
    const int32_t domain =
        Alternatives({{Rule(label), Rule(Rep(Join({Lit("."), {Rule(label)}}), 1, -1))}});
    r.email = Alternatives({Join({{quote, Rule(local)}, Lit("@"), {Rule(domain), quote}})});
    r.hostname = Hostname(alnum);

    // IPv4 dotted decimal (0-255, no leading zeros) and IPv6 (RFC 3986's IPv6address: eight
    // groups of 1-4 hex digits, one run of zero groups written "::", the last 32 bits may be
    // dotted decimal).
    const int32_t octet = Alternatives({Join({Lit("25"), {Set(Range('0', '5'))}}),
                                        {Set(Chars("2")), Set(Range('0', '4')), digit},
                                        {Set(Chars("1")), digit, digit},
                                        {Set(Range('1', '9')), digit},
                                        {digit}});
    const int32_t ipv4 = Alternatives({Join({{Rule(octet)},
                                             Lit("."),
                                             {Rule(octet)},
                                             Lit("."),
                                             {Rule(octet)},
                                             Lit("."),
                                             {Rule(octet)}})});
    r.ipv4 = Alternatives({{quote, Rule(ipv4), quote}});
    const int32_t h16 = Rep({hex}, 1, 4);
    const int32_t ls32 = Alternatives({Join({{Rule(h16)}, Lit(":"), {Rule(h16)}}), {Rule(ipv4)}});
    auto groups = [&](int n) {  // n x (h16 ":")
      Seq out;
      for (int i = 0; i < n; ++i) out = Join({out, {Rule(h16)}, Lit(":")});
      return out;
    };
    // [ *k( h16 ":" ) h16 ]: nothing, or one to k + 1 groups without the last colon.
    auto before = [&](int k) {
      return Alternatives({{}, {Rule(Rep(groups(1), 0, k)), Rule(h16)}});
    };
    const int32_t ipv6 = g_.NewRule();
    g_.AddAlternative(ipv6, Join({groups(6), {Rule(ls32)}}));
    g_.AddAlternative(ipv6, Join({Lit("::"), groups(5), {Rule(ls32)}}));
    for (int k = 0; k <= 6; ++k) {  // [ *k( h16 ":" ) h16 ] "::" then 4 - k groups and ls32, ...
      const int after = 4 - k;
      Seq alternative = Join({{Rule(before(k))}, Lit("::")});
      if (after >= 0) {
        alternative = Join({alternative, groups(after), {Rule(ls32)}});
      } else if (after == -1) {
        alternative = Join({alternative, {Rule(h16)}});
      }
      g_.AddAlternative(ipv6, alternative);
    }
    r.ipv6 = Alternatives({{quote, Rule(ipv6), quote}});

    // ISO 8601 durations as RFC 3339's appendix A writes them: P then years to days, a T part of
    // hours to seconds, or weeks (each count at most kMaxIntegerDigits digits).
    const int32_t count = Rep({digit}, 1, kMaxIntegerDigits);
    auto unit = [&](const char* letter) { return Seq{Rule(count), Set(Chars(letter))}; };
    const int32_t seconds = Alternatives({unit("S")});
    const int32_t minutes = Alternatives({unit("M"), Join({unit("M"), {Rule(seconds)}})});
    const int32_t hours = Alternatives({unit("H"), Join({unit("H"), {Rule(minutes)}})});
    const int32_t dur_time = Alternatives({{Set(Chars("T")), Rule(hours)},
                                           {Set(Chars("T")), Rule(minutes)},
                                           {Set(Chars("T")), Rule(seconds)}});
    const int32_t days = Alternatives({unit("D")});
    const int32_t months = Alternatives({unit("M"), Join({unit("M"), {Rule(days)}})});
    const int32_t years = Alternatives({unit("Y"), Join({unit("Y"), {Rule(months)}})});
    const int32_t dur_date = Alternatives({{Rule(days)},
                                           {Rule(months)},
                                           {Rule(years)},
                                           {Rule(days), Rule(dur_time)},
                                           {Rule(months), Rule(dur_time)},
                                           {Rule(years), Rule(dur_time)}});
    r.duration = Alternatives({{quote, Set(Chars("P")), Rule(dur_date), quote},
                               {quote, Set(Chars("P")), Rule(dur_time), quote},
                               Join({{quote, Set(Chars("P"))}, unit("W"), {quote}})});

    auto hexes = [&](int n) { return Seq(n, hex); };
    r.uuid = Alternatives({Join({{quote},
                                 hexes(8),
                                 Lit("-"),
                                 hexes(4),
                                 Lit("-"),
                                 hexes(4),
                                 Lit("-"),
                                 hexes(4),
                                 Lit("-"),
                                 hexes(12),
                                 {quote}})});
  }

  // A host name (RFC 1123 labels, dot-separated) of at most 253 bytes, as validators check. A
  // label is a letter or digit and then rounds of a counted loop, each a letter or digit with or
  // without one hyphen before it (so no label ends in a hyphen; "--" is not written). A round is
  // at most 2 bytes, so a label of r rounds has at most 1 + 2r. The name is written within a
  // budget of 15 units: a label of 0-7 rounds (at most 15 bytes) costs 1, 8-15 rounds 2, 16-23
  // rounds 3, 24-31 rounds 4 (a label and its dot take at most 16 bytes a unit), which bounds a
  // name at 239 bytes and still allows three labels of 63 bytes or fifteen of 15. The last label
  // starts with a letter (validators refuse an all-numeric top-level label). What follows a
  // label's loop (a dot, the quote) never starts a round, so the loop's counted token caches
  // decide every token that stays in it.
  int32_t Hostname(Element alnum) {
    constexpr int kUnits = 15, kClasses = 4, kRoundsPerUnit = 8;
    const Element letter = Set(Range('a', 'z') | Range('A', 'Z'));
    const int32_t rounds = Loop({{alnum}, {Set(Chars("-")), alnum}});
    auto label = [&](int c, Element first) {
      return Alternatives(
          {{first, g_.Counted(rounds, kRoundsPerUnit * (c - 1), kRoundsPerUnit * c - 1)}});
    };
    int32_t labels[kClasses + 1], last_labels[kClasses + 1];
    for (int c = 1; c <= kClasses; ++c) {
      labels[c] = label(c, alnum);
      last_labels[c] = label(c, letter);
    }
    int32_t within[kUnits + 1];  // within[u]: a name of at most u units
    for (int u = 1; u <= kUnits; ++u) {
      within[u] = g_.NewRule();
      for (int c = 1; c <= std::min(u, kClasses); ++c) {
        g_.AddAlternative(within[u], {Rule(last_labels[c])});
        if (c < u) {
          g_.AddAlternative(within[u], Join({{Rule(labels[c])}, Lit("."), {Rule(within[u - c])}}));
        }
      }
    }
    const Element quote = Set(Chars("\""));
    return Alternatives({{quote, Rule(within[kUnits]), quote}});
  }

  Grammar& g_;
};

}  // namespace

int32_t Repeat(Grammar& grammar, const std::vector<Element>& item, int min, int max) {
  int32_t tail = grammar.NewRule();
  grammar.AddAlternative(tail, {});
  if (max < 0) {
    Seq again = item;
    again.push_back(Element::Rule(tail));
    grammar.AddAlternative(tail, again);
  } else {
    for (int i = min; i < max; ++i) {  // up to max - min more, each optional
      int32_t longer = grammar.NewRule();
      grammar.AddAlternative(longer, {});
      Seq again = item;
      again.push_back(Element::Rule(tail));
      grammar.AddAlternative(longer, again);
      tail = longer;
    }
  }
  Seq body;
  for (int i = 0; i < min; ++i) body.insert(body.end(), item.begin(), item.end());
  body.push_back(Element::Rule(tail));
  int32_t rule = grammar.NewRule();
  grammar.AddAlternative(rule, body);
  return rule;
}

const JsonPrelude& JsonPreludeGrammar() {
  static const JsonPrelude prelude = [] {
    JsonPrelude p;
    p.rules = PreludeWriter(p.grammar).Write();
    p.grammar.set_prelude_size(static_cast<int32_t>(p.grammar.elements().size()));
    return p;
  }();
  return prelude;
}

}  // namespace mkserve::grammar
