// Package docs holds no code: it is the home of sluice's reference pages, one
// Markdown file per subject, which the README maps.
//
// Its tests read README.md and every page here, and check that
//
//   - every relative link names a file or directory that exists, and every
//     #anchor a heading of the page it points into, by GitHub's rules for
//     heading anchors;
//   - every YAML block that is a whole sluice config (a fenced block with the
//     info string yaml whose first line, past blank lines and comments, is
//     "apiVersion: numaflow.numaproj.io/v1alpha1") loads and validates as
//     `vertex validate` loads and validates a file;
//   - the README's example is config/examples/monovertex.yaml, what make run
//     runs.
//
// Fragments of a config (a rateLimit block, a source) start with something
// else and are not checked; a whole config in a page is checked as written.
package docs
