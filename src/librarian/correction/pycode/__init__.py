"""Correcting Python code that a library upgrade broke: tracebacks, imports, tree edits, the installed API.

- :mod:`.failure`: what a traceback says (the exception, the name it is about, the line of the task's
  code, the replacement the message names, Python's own "Did you mean");
- :mod:`.source`: what the code imports and under which names (``import numpy as np``), and where in
  the syntax tree a name is used;
- :mod:`.edits`: edits of the syntax tree (an attribute, a whole expression, a keyword, an import),
  applied at the exact source positions of the nodes, never by text replacement;
- :mod:`.api`: the installed API of a distribution, from its indexed pages and the task's interpreter;
- :mod:`.candidates`: candidate edits for one failure, ranked by what the error and the API say.

Nothing here names a library, a module or a function.
"""
