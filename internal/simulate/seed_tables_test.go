package simulate

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// The seven sample tables of Numaflow's throttling design (max 110, min 10, ramp-up
// 10s, threshold 100%), reproduced by the limiter: the demand of each epoch is the
// table's tokens_used, and the limiter must grant exactly that with the table's pool.
func TestSeedTables(t *testing.T) {
	base := ratelimit.Config{Max: 110, Min: 10, RampUpDuration: 10 * time.Second, ThresholdPercentage: 100,
		CoolDownPeriod: ratelimit.DefaultCoolDownPeriod, RampDownPercentage: ratelimit.DefaultRampDownPercentage}
	with := func(m ratelimit.Mode, f func(*ratelimit.Config)) ratelimit.Config {
		c := base
		c.Mode = m
		if f != nil {
			f(&c)
		}
		return c
	}
	tests := []struct {
		file string
		cfg  ratelimit.Config
	}{
		{"scheduled", with(ratelimit.Scheduled, nil)},
		{"scheduled_with_gaps", with(ratelimit.Scheduled, nil)},
		{"relaxed", with(ratelimit.Relaxed, nil)},
		{"relaxed_with_gaps", with(ratelimit.Relaxed, nil)},
		{"only_if_used", with(ratelimit.OnlyIfUsed, nil)},
		{"go_back_n", with(ratelimit.GoBackN, nil)},
		// The with-gaps table is GoBackN with no cool-down and half a slope per idle epoch.
		{"go_back_n_with_gaps", with(ratelimit.GoBackN, func(c *ratelimit.Config) { c.CoolDownPeriod = 0; c.RampDownPercentage = 50 })},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rows := readSeedTable(t, tt.file)
			demand := make([]int, len(rows))
			for i, r := range rows {
				demand[i] = r.used
			}
			got, err := Simulate(tt.cfg, Scenario{Demand: demand})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rows {
				g := got[i]
				if r.used == NoCall {
					if g.Called {
						t.Errorf("epoch %d: called, want no call", g.Epoch)
					}
					// Without a call only Scheduled has a pool to compare; the other
					// tables leave it blank (GoBackN's gap rows show the pool a call
					// would have seen, which no epoch without a call has).
					if tt.cfg.Mode != ratelimit.Scheduled {
						continue
					}
				} else if g.Granted != r.used {
					t.Errorf("epoch %d: granted %d, want %d", g.Epoch, g.Granted, r.used)
				}
				if r.pool >= 0 && g.PoolMilli != r.pool {
					t.Errorf("epoch %d: pool %d milli-tokens, want %d", g.Epoch, g.PoolMilli, r.pool)
				}
			}
		})
	}
}

type seedRow struct {
	pool int64 // milli-tokens, -1 when blank
	used int   // NoCall when blank
}

func readSeedTable(t *testing.T, name string) []seedRow {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []seedRow
	for _, rec := range recs[1:] {
		r := seedRow{pool: -1, used: NoCall}
		if rec[0] != "" {
			r.pool = parseMilli(t, rec[0])
		}
		if rec[1] != "" {
			r.used = int(parseMilli(t, rec[1]) / 1000)
		}
		rows = append(rows, r)
	}
	return rows
}

func parseMilli(t *testing.T, s string) int64 {
	t.Helper()
	whole, frac, _ := strings.Cut(s, ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	m := w * 1000
	if frac != "" {
		frac = (frac + "000")[:3]
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil {
			t.Fatalf("bad number %q", s)
		}
		m += f
	}
	return m
}
