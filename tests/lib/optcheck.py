#!/usr/bin/env python3
"""optcheck.py OPTS_C MAN_IN HELP_TXT: do cachegw(8) and `cachegw --help`
name every option the gateway accepts (the fuse_opt table in
daemon/opts.c), and does the man page's OPTIONS section name nothing
else? Prints one line per problem; exit 1 if there is any, 0 if none.

The man page must name every entry of the table; --help every option
that takes a value and every flag that does something (not the
negations, the flags passed to the kernel or the fstab words ignored).
An option the man page names is a word at the head of a .TP item in
OPTIONS (".B name", ".BI name= VALUE", ".BR a , b").
"""
import re
import sys


def code_options(path):
    """{name: key} from OPT("name=%..") and FUSE_OPT_KEY("name", KEY_X)."""
    opts = {}
    text = open(path).read()
    table = text[text.index('gw_optspec[]'):]
    table = table[:table.index('FUSE_OPT_END')]
    for m in re.finditer(r'OPT\("([a-z_]+)=%[a-z]+",', table):
        opts[m.group(1)] = 'VALUE'
    for m in re.finditer(r'FUSE_OPT_KEY\("(-{0,2}[a-z_]+)(=?)",\s*(KEY_[A-Z]+)\)',
                         table):
        opts[m.group(1)] = 'VALUE' if m.group(2) else m.group(3)
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
        if key in ('KEY_PASS', 'KEY_IGNORE', 'KEY_NOWRITEBACK', 'KEY_CTO',
                   'KEY_DEBUG', 'KEY_VERSION', 'KEY_HELP', 'KEY_FG'):
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
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
