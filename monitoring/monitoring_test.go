package monitoring

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	rulesFile      = "alerts.yaml"
	ruleTestsFile  = "alerts_test.yaml"
	dashboardFile  = "dashboard.json"
	metricsDocFile = "../docs/observability.md"
)

// TestAlertRules checks the rules with promtool and runs their unit tests.
func TestAlertRules(t *testing.T) {
	promtool := lookPromtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", ruleTestsFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestAlertRulesTested checks that the unit tests test every rule.
func TestAlertRulesTested(t *testing.T) {
	rules := readFile(t, rulesFile)
	tests := readFile(t, ruleTestsFile)
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert:\s*(\S+)`).FindAllStringSubmatch(rules, -1) {
		if !regexp.MustCompile(`(?m)^\s*alertname:\s*` + regexp.QuoteMeta(m[1]) + `\s*$`).MatchString(tests) {
			t.Errorf("alert %s has no test in %s", m[1], ruleTestsFile)
		}
	}
}

// TestMetricsAreDocumented checks that every sluice metric the rules, their
// tests and the dashboard name is in the metrics table of docs/observability.md.
func TestMetricsAreDocumented(t *testing.T) {
	documented := documentedMetrics(t)
	for _, file := range []string{rulesFile, ruleTestsFile, dashboardFile} {
		for _, name := range metricNames(readFile(t, file)) {
			if _, ok := documented[seriesMetric(name, documented)]; !ok {
				t.Errorf("%s names %s, which the metrics table of docs/observability.md does not list", file, name)
			}
		}
	}
}

// TestDashboard checks the dashboard's shape: a recent schema, the vertex
// variable, panels that do not overlap, and queries that each filter on
// $vertex and together show every metric of docs/observability.md.
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d; want 36 or later (Grafana 9 and on)", d.SchemaVersion)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	documented := documentedMetrics(t)
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds, ok := vars["datasource"]; !ok || ds.Type != "datasource" || ds.Query != "prometheus" {
		t.Errorf("no datasource variable of Prometheus data sources: %+v", ds)
	}
	v := vars["vertex"]
	m := regexp.MustCompile(`^label_values\((sluice_[a-z0-9_]+), vertex\)$`).FindStringSubmatch(fmt.Sprint(v.Query))
	switch {
	case v.Type != "query" || m == nil:
		t.Errorf("variable vertex: type %q, query %q; want label_values(<sluice metric>, vertex)", v.Type, v.Query)
	case documented[m[1]] == "":
		t.Errorf("variable vertex: %s is not in the metrics table of docs/observability.md", m[1])
	case !v.Multi || !v.IncludeAll:
		t.Errorf("variable vertex: multi %v, includeAll %v; want both", v.Multi, v.IncludeAll)
	}

	ids := map[int]string{}
	shown := map[string]bool{}
	var boxes []panel
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is not within the 24 columns", p.Title, g)
		}
		for _, o := range boxes {
			if g.X < o.GridPos.X+o.GridPos.W && o.GridPos.X < g.X+g.W && g.Y < o.GridPos.Y+o.GridPos.H && o.GridPos.Y < g.Y+g.H {
				t.Errorf("panels %q and %q overlap", p.Title, o.Title)
			}
		}
		boxes = append(boxes, p)
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v; want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, s := range regexp.MustCompile(`(sluice_[a-z0-9_]+)(\{[^}]*\})?`).FindAllStringSubmatch(q.Expr, -1) {
				shown[seriesMetric(s[1], documented)] = true
				if !strings.Contains(s[2], `vertex=~"$vertex"`) {
					t.Errorf("panel %q, query %s: %s does not filter on vertex=~\"$vertex\"", p.Title, q.RefID, s[0])
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if !shown[name] {
			t.Errorf("no panel shows %s (in the metrics table of docs/observability.md)", name)
		}
	}
}

// TestDashboardQueries has promtool parse every query of the dashboard, with
// Grafana's variables set, as a recording rule.
func TestDashboardQueries(t *testing.T) {
	promtool := lookPromtool(t)
	d := readDashboard(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "1m", "$vertex", "in|out")
	n := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			n++
			expr, err := json.Marshal(vars.Replace(q.Expr)) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rules, "      - record: panel_%d_%s\n        expr: %s\n", p.ID, q.RefID, expr)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules on the dashboard's %d queries: %v\n%s", n, err, out)
	}
	t.Logf("promtool parses the dashboard's %d queries", n)
}

// dashboard is what the tests read of a Grafana dashboard.
type dashboard struct {
	UID           string
	Title         string
	SchemaVersion int
	Templating    struct{ List []variable }
	Panels        []panel
}

type variable struct {
	Name, Type        string
	Query             any // a string, or an object in newer Grafana
	Multi, IncludeAll bool
}

type datasource struct{ Type, UID string }

type panel struct {
	ID         int
	Type       string
	Title      string
	Datasource datasource
	GridPos    struct{ X, Y, W, H int }
	Targets    []struct {
		RefID string
		Expr  string
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if len(d.Panels) == 0 {
		t.Fatalf("%s has no panels", dashboardFile)
	}
	return d
}

// documentedMetrics returns the metrics of the metrics table of
// docs/observability.md, by name, with their type.
func documentedMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `(sluice_[a-z0-9_]+)(?:\\{[^}`]*\\})?` \\| (counter|gauge|histogram|summary) \\|")
	for _, m := range row.FindAllStringSubmatch(readFile(t, metricsDocFile), -1) {
		out[m[1]] = m[2]
	}
	if len(out) < 10 {
		t.Fatalf("%s: found %d rows in the metrics table (%v); has its format changed?", metricsDocFile, len(out), slices.Sorted(maps.Keys(out)))
	}
	return out
}

// metricNames returns the distinct sluice metric names in text.
func metricNames(text string) []string {
	names := regexp.MustCompile(`\bsluice_[a-z0-9_]+`).FindAllString(text, -1)
	slices.Sort(names)
	return slices.Compact(names)
}

// seriesMetric returns the metric a series name belongs to: a histogram's
// _bucket, _sum and _count series belong to the histogram.
func seriesMetric(name string, documented map[string]string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && documented[base] == "histogram" {
			return base
		}
	}
	return name
}

func lookPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus): the rules are not checked")
	}
	return p
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
