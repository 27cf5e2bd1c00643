#!/usr/bin/env python3
"""optcheck.py OPTS_C MAN_IN HELP_TXT: do cachegw(8) and `cachegw --help`
name every option the gateway accepts (the options table, opt_table in
daemon/opts.c), does the man page's OPTIONS section name nothing
else, and where the man page states an option's default, does --help
print the same? Prints one line per problem; exit 1 if there is any, 0
if none.

The man page must name every name of the table; --help every option
that takes a value and every flag that does something, with its
negation (not the flags passed to the kernel, the fstab words ignored
or the command line's -f, -d, -h, -V).
An option the man page names is a word at the head of a .TP item in
OPTIONS (".B name", ".BI name= VALUE", ".BR a , b").

Defaults: an entry of --help (a line starting with two spaces, its
names before the first two spaces, its continuation lines indented
further) gives its default in brackets at its end, "[64K]"; several
names in one entry take one value each in order ("[10,7,3]", or one
bracket each). An item of the man page states a default as "default X",
"default: X", "defaults A, B and C" (one per name of the item, in order)
or as a bold word followed by "(the default)" or "(..., the default)".
Values compare up to their first ';', case and spacing aside.
"""
import re
import sys


def code_options(path):
    """{name: kind} from the rows of gw_opt_table: the kind of its macro
    (NUM, SIZE, STR, CHOICE, FLAG), or for KEY and WORD rows their key
    (GW_OPTKEY_PASS, ...); a FLAG row's negation is a FLAG too."""
    opts = {}
    text = open(path).read()
    table = text[text.index('gw_opt_table[] = {'):]
    table = table[:table.index('\n};')]
    for m in re.finditer(r'\b(STR|SIZEW?|NUMW?|CHOICE|FLAG|KEY|WORD)\(\s*'
                         r'"([^"]+)",\s*(\w+)(?:,\s*\w+,\s*(NULL|"([^"]+)"))?',
                         table):
        kind, name = m.group(1).rstrip('W'), m.group(2)
        if kind in ('KEY', 'WORD'):
            kind = m.group(3)
        opts[name] = kind
        if kind == 'FLAG' and m.group(5):
            opts[m.group(5)] = 'FLAG'
    return opts


def man_items(path):
    """Words at the head of every .TP item of the OPTIONS section."""
    lines = open(path).read().split('\n')
    start = lines.index('.SH OPTIONS')
    items, i = set(), start + 1
    while i < len(lines) and not lines[i].startswith('.SH'):
        if lines[i] == '.TP' and i + 1 < len(lines):
            tag = lines[i + 1].replace('\\-', '-')
            tag = re.sub(r'^\.(B|BI|BR|I|IR|RB)\s+', '', tag)
            for word in re.findall(r'-{0,2}[a-z_][a-z_0-9]*(?==|\b)', tag):
                items.add(word)
        i += 1
    return items, '\n'.join(lines[start:i]).replace('\\-', '-')


def roff_plain(text):
    """The words of roff source, macros and font escapes dropped."""
    out = []
    for line in text.split('\n'):
        if line.startswith('.'):
            line = re.sub(r'^\.[A-Za-z]+\s*', '', line)
        out.append(line)
    t = ' '.join(out)
    t = re.sub(r'\\f[BIRP]', '', t).replace('\\-', '-').replace('\\(dq', '')
    return re.sub(r'\s+', ' ', t.replace('"', ''))


def norm(v):
    return re.sub(r'\s+', ' ', v.split(';')[0]).strip().lower()


def man_defaults(path, names):
    """{name: default} for the options whose man page item states one."""
    lines = open(path).read().split('\n')
    start = lines.index('.SH OPTIONS')
    end = start + 1
    while end < len(lines) and not lines[end].startswith('.SH'):
        end += 1
    out = {}
    i = start + 1
    while i < end:
        if lines[i] != '.TP':
            i += 1
            continue
        j = i + 2
        while j < end and lines[j] not in ('.TP',) and \
                not lines[j].startswith('.SS'):
            j += 1
        tag = lines[i + 1].replace('\\-', '-')
        if tag == '.TQ':
            tag = ''
        tag = re.sub(r'^\.(B|BI|BR|I|IR|RB)\s+', '', tag)
        tagnames = [w for w in re.findall(r'-{0,2}[a-z_][a-z_0-9]*(?==|\b)',
                                          tag) if w in names]
        body = '\n'.join(lines[i + 2:j])
        plain = roff_plain(body)
        vals = None
        m = re.search(r'\bdefaults:?\s+(.+?)(?:[;)]|\.(?:\s|$)|$)', plain,
                      re.I)
        if m:
            vals = [re.sub(r'\s+seconds$', '', v.strip())
                    for v in re.split(r',\s*|\s+and\s+', m.group(1))]
        else:
            m = re.search(r'\bdefault:?\s+(.+?)(?:[;,)]|\.(?:\s|$)|$)',
                          plain, re.I)
            if not m:
                m = re.search(r'^\.BR?\s+"?([^\s"]+)"?\s*\n\('
                              r'(?:[^()\n]*,\s*)?the default\)', body, re.M)
            if not m:
                m = re.search(r'^(\S+) \(the default\)', body, re.M)
            if m:
                vals = [m.group(1).replace('\\-', '-').strip()]
        if vals and tagnames:
            if len(vals) == 1:
                vals = vals * len(tagnames)
            if len(vals) == len(tagnames):
                for n, v in zip(tagnames, vals):
                    out[n] = v
            else:
                out[tagnames[0]] = 'one of %s for %s' % (vals, tagnames)
        i = j
    return out


def brackets(text):
    """The top-level [...] groups of text, in order."""
    groups, depth, cur = [], 0, ''
    for ch in text:
        if ch == '[':
            if depth:
                cur += ch
            depth += 1
        elif ch == ']' and depth:
            depth -= 1
            if depth:
                cur += ch
            else:
                groups.append(cur)
                cur = ''
        elif depth:
            cur += ch
    return groups


def help_defaults(helptext):
    """{name: default} from the entries of --help that give one."""
    entries = []
    for line in helptext.split('\n'):
        if re.match(r'^  \S', line):
            entries.append(line[2:])
        elif re.match(r'^   +\S', line) and entries:
            entries[-1] += ' ' + line.strip()
    out = {}
    for e in entries:
        parts = re.split(r'\s{2,}', e, maxsplit=1)
        if len(parts) == 1:
            parts = e.split(' ', 1) if '=' in e.split(' ', 1)[0] else [e]
        tag, text = parts[0], parts[1] if len(parts) > 1 else ''
        names = re.findall(r'(?<![A-Za-z_-])(-{0,2}[a-z][a-z_0-9]*)', tag)
        groups = brackets(text)
        if not groups or not names:
            continue
        if len(groups) == len(names):
            vals = groups
        elif len(groups) == 1 and len(names) > 1 and \
                len(groups[0].split(';')[0].split(',')) == len(names):
            vals = groups[0].split(';')[0].split(',')
        else:
            vals = [groups[-1]] * len(names)
        for n, v in zip(names, vals):
            out[n] = v
    return out


def main():
    if len(sys.argv) != 4:
        print(__doc__.split('\n')[0], file=sys.stderr)
        return 2
    opts = code_options(sys.argv[1])
    items, section = man_items(sys.argv[2])
    helptext = open(sys.argv[3]).read()
    problems = []
    if len(opts) < 20:
        problems.append('found only %d options in %s: is the table still '
                        'there?' % (len(opts), sys.argv[1]))
    for name, key in sorted(opts.items()):
        if not re.search(r'(?<![a-z_])%s(?![a-z_])' % re.escape(name),
                         section):
            problems.append('%s: accepted by the gateway, not in cachegw(8) '
                            'OPTIONS' % name)
        if key in ('GW_OPTKEY_PASS', 'GW_OPTKEY_IGNORE', 'GW_OPTKEY_DEBUG',
                   'GW_OPTKEY_VERSION', 'GW_OPTKEY_HELP', 'GW_OPTKEY_FG'):
            continue
        if not re.search(r'(?<![a-z_])%s(?![a-z_])' % re.escape(name),
                         helptext):
            problems.append('%s: accepted by the gateway, not in cachegw '
                            '--help' % name)
    # Words at the head of an item that look like options must exist.
    # Item tags also name values (e.g. "DIR"): only lower-case words
    # with a '=' after them or alone in a bold tag are options.
    for word in sorted(items):
        if word in opts or word.startswith('-'):
            continue
        if re.search(r'\.(B|BI|BR)\s+[^\n]*\b%s=' % re.escape(word),
                     section) and word not in opts:
            problems.append('%s=: in cachegw(8) OPTIONS, not accepted by '
                            'the gateway' % word)
    # Defaults: where the man page states one, --help prints the same.
    hdef = help_defaults(helptext)
    names = set(opts)
    for name, mv in sorted(man_defaults(sys.argv[2], names).items()):
        hv = hdef.get(name)
        if hv is None:
            problems.append('%s: default %s in cachegw(8), none in cachegw '
                            '--help' % (name, mv))
        elif norm(hv) != norm(mv):
            problems.append('%s: default %s in cachegw(8), [%s] in cachegw '
                            '--help' % (name, mv, hv))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
