"""What torch.testing._internal.common_utils needs of the `expecttest` package,
which Debian 12 does not ship: a TestCase base class, the ACCEPT switch, and
assertExpectedInline for the few tests that compare against inline text.
Only for tests/py/dist_suite.py; it is put first on sys.path there.
"""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        """The inline text, compared as expecttest does (surrounding blank
        lines and a common indent removed); no rewriting (ACCEPT)."""
        import textwrap

        def norm(s):
            return textwrap.dedent(s).strip("\n")

        self.assertEqual(norm(expect), norm(actual))

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect, skip=1)
            return
        self.fail(f"did not raise {exc_type.__name__}")
