package simulate

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// ParseDemand parses a demand list, "10,20,,60": tokens asked per epoch, whole
// numbers, an empty entry for an epoch without a call; an entry NxK asks N
// in each of K epochs ("1000x60").
func ParseDemand(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("(%q) must list at least one epoch, e.g. \"10,20,,60\"", s)
	}
	var out []int
	for i, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			out = append(out, NoCall)
			continue
		}
		v, times, rep := strings.Cut(p, "x")
		k := 1
		if rep {
			var err error
			if k, err = strconv.Atoi(times); err != nil || k < 1 || k > maxEpochs {
				return nil, fmt.Errorf("entry %d (%q): the epochs after x must be a whole number from 1 to %d", i+1, p, maxEpochs)
			}
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("entry %d (%q) must be a whole number of tokens, 0 or more, NxK for N in K epochs, or empty for no call", i+1, p)
		}
		if len(out)+k > maxEpochs {
			return nil, fmt.Errorf("lists more than %d epochs", maxEpochs)
		}
		for range k {
			out = append(out, n)
		}
	}
	return out, nil
}

// maxEpochs is the most epochs a demand list may have.
const maxEpochs = 100_000

// ParseSignals parses a throttle signal list, "0,0,1,0,2s": per epoch, 0 or
// empty for none, 1 for a signal without a Retry-After, or a duration for a
// signal with that Retry-After.
func ParseSignals(s string) ([]time.Duration, error) {
	parts := strings.Split(s, ",")
	out := make([]time.Duration, len(parts))
	for i, p := range parts {
		switch p = strings.TrimSpace(p); p {
		case "", "0":
			out[i] = NoSignal
		case "1":
			out[i] = 0
		default:
			d, err := time.ParseDuration(p)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("entry %d (%q) must be 0 or empty (no signal), 1 (a signal) or a Retry-After such as 2s", i+1, p)
			}
			out[i] = d
		}
	}
	return out, nil
}

// notes returns what happened to the limit in an epoch: a live change, a
// throttle signal, a cut, a pause; "" when nothing.
func notes(e SimEpoch) string {
	var n []string
	if e.Switched {
		n = append(n, fmt.Sprintf("changed: max %d", e.Max))
	}
	if e.Cut {
		n = append(n, "cut")
	}
	if e.Paused {
		n = append(n, "paused")
	}
	if e.Signal {
		n = append(n, "signal")
	}
	return strings.Join(n, " ")
}

// adapted reports whether any epoch had a signal, a cut or a pause: the
// outputs then have a column for them.
func adapted(epochs []SimEpoch) bool {
	return slices.ContainsFunc(epochs, func(e SimEpoch) bool { return e.Signal || e.Cut || e.Paused })
}

// downstream reports whether the epochs had a downstream that accepted or
// refused tokens: the outputs then have columns for them.
func downstream(epochs []SimEpoch) bool {
	return slices.ContainsFunc(epochs, func(e SimEpoch) bool { return e.Accepted > 0 || e.Refused > 0 })
}

// changed reports whether any epoch began a live change: the CSV then has
// columns for the max and the switch.
func changed(epochs []SimEpoch) bool {
	return slices.ContainsFunc(epochs, func(e SimEpoch) bool { return e.Switched })
}

func flag01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// formatMilli prints milli-tokens as tokens with up to three decimals.
func formatMilli(m int64) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	s := sign + strconv.FormatInt(m/1000, 10)
	if f := m % 1000; f != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%03d", f), "0")
	}
	return s
}

// simCells returns the pool and granted cells of an epoch: blank where the epoch had
// no call, except the pool of Scheduled, which moves with or without calls.
func simCells(mode ratelimit.Mode, e SimEpoch) (pool, granted string) {
	if e.Called || mode == ratelimit.Scheduled {
		pool = formatMilli(e.PoolMilli)
	}
	if e.Called {
		granted = strconv.Itoa(e.Granted)
	}
	return pool, granted
}

// WriteCSV writes the epochs as CSV: epoch,pool,granted, with empty cells
// where an epoch had no call, accepted,refused with a downstream,
// signal,cut,paused (0 or 1) when an epoch had any, and max,switched when an
// epoch began a live change.
func WriteCSV(w io.Writer, mode ratelimit.Mode, epochs []SimEpoch) error {
	var b strings.Builder
	more, live, down := adapted(epochs), changed(epochs), downstream(epochs)
	b.WriteString("epoch,pool,granted")
	if down {
		b.WriteString(",accepted,refused")
	}
	if more {
		b.WriteString(",signal,cut,paused")
	}
	if live {
		b.WriteString(",max,switched")
	}
	b.WriteString("\n")
	for _, e := range epochs {
		pool, granted := simCells(mode, e)
		fmt.Fprintf(&b, "%d,%s,%s", e.Epoch, pool, granted)
		if down {
			fmt.Fprintf(&b, ",%d,%d", e.Accepted, e.Refused)
		}
		if more {
			fmt.Fprintf(&b, ",%d,%d,%d", flag01(e.Signal), flag01(e.Cut), flag01(e.Paused))
		}
		if live {
			fmt.Fprintf(&b, ",%d,%d", e.Max, flag01(e.Switched))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTable writes the config and then the epochs as a table, with "-" where
// an epoch had no call.
func WriteTable(w io.Writer, cfg ratelimit.Config, epochs []SimEpoch) error {
	fmt.Fprintf(w, "mode %s, min %d, max %d, ramp-up %v", cfg.Mode, cfg.Min, cfg.Max, cfg.RampUpDuration)
	switch cfg.Mode {
	case ratelimit.OnlyIfUsed:
		fmt.Fprintf(w, ", threshold %d%%", cfg.ThresholdPercentage)
	case ratelimit.GoBackN:
		fmt.Fprintf(w, ", threshold %d%%, cool-down %v, ramp-down %d%%", cfg.ThresholdPercentage, cfg.CoolDownPeriod, cfg.RampDownPercentage)
	}
	if cfg.Adaptive {
		fmt.Fprintf(w, ", adaptive, cut %d%%", cfg.CutPercentage)
	}
	fmt.Fprintln(w)
	more, down := adapted(epochs) || changed(epochs), downstream(epochs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "epoch\tpool\tgranted\t")
	if down {
		fmt.Fprint(tw, "accepted\trefused\t")
	}
	if more {
		fmt.Fprint(tw, "\t")
	}
	fmt.Fprintln(tw)
	for _, e := range epochs {
		pool, granted := simCells(cfg.Mode, e)
		if !e.Called {
			granted = "-"
			if pool == "" {
				pool = "-"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t", e.Epoch, pool, granted)
		if down {
			fmt.Fprintf(tw, "%d\t%d\t", e.Accepted, e.Refused)
		}
		if more {
			fmt.Fprintf(tw, "%s\t", notes(e))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil || !down {
		return err
	}
	var acc, ref int
	for _, e := range epochs {
		acc, ref = acc+e.Accepted, ref+e.Refused
	}
	_, err := fmt.Fprintf(w, "accepted %d, refused %d (%.2f%% of those sent)\n", acc, ref, 100*float64(ref)/float64(max(acc+ref, 1)))
	return err
}
