package docs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// configAPIVersion marks a YAML block as a whole config: a fenced block with
// the info string yaml whose first line, past blank lines and comments, is
// this one. Such a block must pass `vertex validate`.
const configAPIVersion = "apiVersion: numaflow.numaproj.io/v1alpha1"

// minConfigBlocks is the fewest config blocks the pages hold; fewer means
// the marker or the parser no longer finds them.
const minConfigBlocks = 3

// pages returns the pages checked: the README and every page of docs/.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no pages in docs/")
	}
	return append([]string{filepath.Join("..", "README.md")}, docs...)
}

// TestLinks checks that every relative link of the README and of docs/
// resolves: the file or directory exists, and an #anchor matches a heading of
// the page it points into by GitHub's rules (see slug).
func TestLinks(t *testing.T) {
	parsed := map[string]*page{}
	load := func(path string) *page {
		path = filepath.Clean(path)
		if p, ok := parsed[path]; ok {
			return p
		}
		p, err := parse(path)
		if err != nil {
			t.Fatal(err)
		}
		parsed[path] = p
		return p
	}
	links := 0
	for _, file := range pages(t) {
		from := load(file)
		for _, l := range from.links {
			if isExternal(l.target) {
				continue
			}
			links++
			where := fmt.Sprintf("%s:%d: link %q", file, l.line, l.target)
			path, anchor, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s: an anchor into a file that is not Markdown", where)
				continue
			}
			if !load(target).anchors[anchor] {
				t.Errorf("%s: no heading of %s has the anchor #%s", where, target, anchor)
			}
		}
	}
	if links == 0 {
		t.Fatal("found no relative links; has the parser broken?")
	}
}

// TestConfigBlocks checks that every YAML block marked as a whole config
// (configAPIVersion) loads and validates, as `vertex validate` checks a file.
func TestConfigBlocks(t *testing.T) {
	n := 0
	for _, file := range pages(t) {
		p, err := parse(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range p.blocks {
			if !isConfig(b) {
				continue
			}
			n++
			t.Run(fmt.Sprintf("%s:%d", filepath.Base(file), b.line), func(t *testing.T) {
				_, err := vertexconfig.Parse([]byte(b.text))
				var ce *config.Error
				switch {
				case errors.As(err, &ce):
					for _, pr := range ce.Problems {
						// Problem lines count from the block's first line.
						if pr.Line > 0 {
							pr.Line += b.line
						}
						t.Errorf("%s: %s", file, pr)
					}
				case err != nil:
					t.Errorf("%s:%d: %v", file, b.line, err)
				}
			})
		}
	}
	if n < minConfigBlocks {
		t.Fatalf("found %d config blocks, want at least %d: has the marker (%q) changed?", n, minConfigBlocks, configAPIVersion)
	}
}

// TestREADMEExample checks that the README's example is the file it names,
// config/examples/monovertex.yaml (what make run runs), less the comment at
// its head.
func TestREADMEExample(t *testing.T) {
	p, err := parse(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "config", "examples", "monovertex.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := string(data)
	for strings.HasPrefix(want, "#") {
		_, want, _ = strings.Cut(want, "\n")
	}
	for _, b := range p.blocks {
		if isConfig(b) {
			if b.text != want {
				t.Errorf("README.md:%d: the example differs from config/examples/monovertex.yaml (less its head comment):\n%s\nwant:\n%s", b.line, b.text, want)
			}
			return
		}
	}
	t.Error("README.md has no config block")
}

// isConfig reports whether a fenced block is a whole config: yaml, and its
// first line past blank lines and comments is configAPIVersion.
func isConfig(b block) bool {
	if b.info != "yaml" {
		return false
	}
	for line := range strings.SplitSeq(b.text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		return line == configAPIVersion
	}
	return false
}

func isExternal(target string) bool {
	return regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(target)
}

// page is what the tests need of a Markdown file.
type page struct {
	anchors map[string]bool
	links   []link
	blocks  []block
}

type link struct {
	line   int
	target string
}

// block is a fenced code block: its info string, its text, and the line of
// its opening fence.
type block struct {
	line int
	info string
	text string
}

var (
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	fenceRE   = regexp.MustCompile("^ {0,3}(```+|~~~+)\\s*([^`\\s]*)")
	codeRE    = regexp.MustCompile("`+[^`]*`+")
	linkRE    = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
)

// parse reads a Markdown file: its headings' anchors, the links outside code
// blocks and code spans, and its fenced code blocks.
func parse(path string) (*page, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &page{anchors: map[string]bool{}}
	seen := map[string]int{}
	var open *block
	var fence string
	var text strings.Builder
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		if open != nil {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				open.text = text.String()
				p.blocks = append(p.blocks, *open)
				open = nil
				continue
			}
			text.WriteString(line + "\n")
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			open, fence = &block{line: n, info: m[2]}, m[1]
			text.Reset()
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			s := slug(m[2])
			if k := seen[s]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				p.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, "``"), -1) {
			p.links = append(p.links, link{line: n, target: m[1]})
		}
	}
	if open != nil {
		return nil, fmt.Errorf("%s:%d: code block not closed", path, open.line)
	}
	return p, nil
}

// slug is the anchor GitHub gives a heading: the heading's text (inline code
// and links reduced to their text), in lower case, with every character that
// is not a letter, a digit, a space, '-' or '_' dropped, and spaces turned into
// '-'. A page's second heading with the same slug gets "-1", its third "-2".
func slug(heading string) string {
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	heading = strings.NewReplacer("`", "", "*", "").Replace(heading)
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for _, tt := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"The `vertex` command", "the-vertex-command"},
		{"Closed-loop throttling (`adaptive`)", "closed-loop-throttling-adaptive"},
		{"`vertex simulate`", "vertex-simulate"},
		{"Inside Numaflow's own pods", "inside-numaflows-own-pods"},
		{"Sources, sinks & [Kafka](kafka.md)", "sources-sinks--kafka"},
		{"`onStoreFailure`: pause or lastKnown", "onstorefailure-pause-or-lastknown"},
		{"per_key limits", "per_key-limits"},
	} {
		t.Run(tt.heading, func(t *testing.T) {
			if got := slug(tt.heading); got != tt.want {
				t.Errorf("slug(%q) = %q; want %q", tt.heading, got, tt.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.md")
	md := "# A page\n\nSee [b](b.md#x) and `[not](a-link.md)`.\n\n" +
		"```yaml\n# c\napiVersion: numaflow.numaproj.io/v1alpha1\n[no](link.md)\n```\n\n" +
		"## A page\n\n~~~\n# not a heading\n~~~\n"
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := parse(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []link{{3, "b.md#x"}}; fmt.Sprint(p.links) != fmt.Sprint(want) {
		t.Errorf("links = %v; want %v", p.links, want)
	}
	if want := map[string]bool{"a-page": true, "a-page-1": true}; fmt.Sprint(p.anchors) != fmt.Sprint(want) {
		t.Errorf("anchors = %v; want %v", p.anchors, want)
	}
	if len(p.blocks) != 2 || !isConfig(p.blocks[0]) || isConfig(p.blocks[1]) || p.blocks[0].line != 5 {
		t.Errorf("blocks = %+v; want a config block at line 5 and another block", p.blocks)
	}
}
