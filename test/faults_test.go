package test

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The fault suite (TestFault*) runs each fault of the table in
// docs/faults.md against real processes and records, per row, what was
// measured; TestMain prints the table once every test has run. `make test`
// runs each row once (a short round, so that a regression fails CI);
// `make faults` runs every row -faults.runs times.
var (
	faultRuns      = flag.Int("faults.runs", 1, "how many times the fault suite runs each row")
	faultTableFile = flag.String("faults.table", "", "a file to write the fault table to as well")
)

// faultRow is one row of the fault table: a fault under a policy, what must
// hold, and what was measured over its runs.
type faultRow struct {
	Fault  string // "replica frozen 2s"
	Policy string // "pause", "lastKnown", "-"
	Holds  string // what must hold, in words
	Runs   int
	// Epochs is the epochs checked over all runs, OverMax how many of them
	// granted more than they may, and Worst the worst of them as
	// "granted/allowed" (e.g. "300/300").
	Epochs, OverMax int
	Worst           string
	// Lost and Duplicated count messages, for the rows about data.
	Lost, Duplicated int
	// Failed counts runs in which something that must hold did not.
	Failed int
	Note   string
}

var faultTable struct {
	sync.Mutex
	rows map[string]*faultRow // by Fault + Policy
}

// recordFault adds one run's figures to its row.
func recordFault(r faultRow) {
	faultTable.Lock()
	defer faultTable.Unlock()
	if faultTable.rows == nil {
		faultTable.rows = map[string]*faultRow{}
	}
	key := r.Fault + "\x00" + r.Policy
	row, ok := faultTable.rows[key]
	if !ok {
		c := r
		faultTable.rows[key] = &c
		return
	}
	row.Runs += r.Runs
	row.Epochs += r.Epochs
	row.OverMax += r.OverMax
	row.Lost += r.Lost
	row.Duplicated += r.Duplicated
	row.Failed += r.Failed
	if worse(r.Worst, row.Worst) {
		row.Worst = r.Worst
	}
	if r.Note != "" && !strings.Contains(row.Note, r.Note) {
		row.Note = strings.TrimPrefix(row.Note+"; "+r.Note, "; ")
	}
}

// worse reports whether granted/allowed a is a worse ratio than b.
func worse(a, b string) bool {
	ratio := func(s string) float64 {
		var g, m float64
		if _, err := fmt.Sscanf(s, "%g/%g", &g, &m); err != nil || m == 0 {
			return -1
		}
		return g / m
	}
	return ratio(a) > ratio(b)
}

// writeFaultTable prints the fault table, and writes it to -faults.table
// when that is set.
func writeFaultTable() {
	printFaultTable(os.Stdout)
	if *faultTableFile == "" {
		return
	}
	var b strings.Builder
	printFaultTable(&b)
	if err := os.WriteFile(*faultTableFile, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "writing the fault table:", err)
	}
}

// printFaultTable writes the fault table, if any row was recorded, as
// Markdown.
func printFaultTable(w io.Writer) {
	faultTable.Lock()
	defer faultTable.Unlock()
	if len(faultTable.rows) == 0 {
		return
	}
	rows := make([]*faultRow, 0, len(faultTable.rows))
	for _, r := range faultTable.rows {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Fault != rows[j].Fault {
			return rows[i].Fault < rows[j].Fault
		}
		return rows[i].Policy < rows[j].Policy
	})
	fmt.Fprintln(w, "\nfault suite:")
	fmt.Fprintln(w, "| fault | policy | must hold | runs | epochs | epochs over max | worst epoch | lost | duplicated | failed runs | note |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %s | %d | %d | %d | %s |\n",
			r.Fault, r.Policy, r.Holds, r.Runs, r.Epochs, r.OverMax, dash(r.Worst), r.Lost, r.Duplicated, r.Failed, r.Note)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// faultRounds is how many runs of a row a test makes.
func faultRounds(t *testing.T) int {
	t.Helper()
	if *faultRuns < 1 {
		t.Fatalf("-faults.runs (%d) must be at least 1", *faultRuns)
	}
	return *faultRuns
}
