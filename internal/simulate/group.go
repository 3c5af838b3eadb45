package simulate

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
)

// SimMember is one vertex of a [SimulateGroup] run: one replica with its
// own limit, which joins the group.
type SimMember struct {
	Name   string
	Config ratelimit.Config
	// Demand is the messages the vertex has to send in each epoch; [NoCall]
	// (or an entry past its end) for none.
	Demand []int
}

// SimGroupEpoch is one epoch of a [SimulateGroup] run.
type SimGroupEpoch struct {
	// Epoch counts from 1.
	Epoch int
	// GroupPoolMilli is the group's pool P in the epoch, milli-tokens.
	GroupPoolMilli int64
	// Sent is what each member sent, in the order of the members, and Lent
	// and Borrowed the group's tokens each lent and borrowed in the epoch.
	Sent, Lent, Borrowed []int64
}

// groupStart is where group simulations start: an epoch boundary.
var groupStart = time.Unix(1_700_000_000, 0)

// simSlices is how many times a simulated member asks in an epoch: once per
// sync interval, as a forwarder reading all the time does.
const simSlices = int(time.Second / ratelimit.DefaultSyncInterval)

// SimulateGroup runs real rate limiters on a manual clock: each member's own,
// and one replica of the group's limit per member, sharing an in-process
// store of the group as the vertices of a group share the Redis one. In
// each slice of a sync interval a member asks for what is left of its
// epoch's demand: its own limit first, then the group for what that
// granted; tokens of its own limit the group refused go back. A member that
// sends nothing lends its share of the group to the others (group.Lend is
// set). Pacing is left out.
func SimulateGroup(group ratelimit.Config, members []SimMember, epochs int) ([]SimGroupEpoch, error) {
	if epochs < 1 {
		return nil, fmt.Errorf("simulate: %d epochs: want 1 or more", epochs)
	}
	group.Pacing, group.Lend = 0, true
	clk := clock.NewManual(groupStart)
	s := memstore.New(clk)
	own := make([]*ratelimit.Limiter, len(members))
	grp := make([]*ratelimit.Limiter, len(members))
	defer func() {
		for _, l := range append(own, grp...) {
			if l != nil {
				l.Close(context.Background())
			}
		}
	}()
	for i, m := range members {
		m.Config.Pacing = 0
		var err error
		if own[i], err = ratelimit.New(m.Config, ratelimit.WithClock(clk)); err != nil {
			return nil, fmt.Errorf("simulate: member %s: %w", m.Name, err)
		}
		if grp[i], err = ratelimit.New(group, ratelimit.WithClock(clk), ratelimit.WithStore(s), ratelimit.WithReplicaID(m.Name)); err != nil {
			return nil, fmt.Errorf("simulate: the group: %w", err)
		}
	}
	out := make([]SimGroupEpoch, epochs)
	lent0, borrowed0 := make([]int64, len(members)), make([]int64, len(members))
	for e := range epochs {
		ep := SimGroupEpoch{Epoch: e + 1, Sent: make([]int64, len(members)),
			Lent: make([]int64, len(members)), Borrowed: make([]int64, len(members))}
		left := make([]int, len(members))
		for i, m := range members {
			if e < len(m.Demand) && m.Demand[e] > 0 {
				left[i] = m.Demand[e]
			}
		}
		start := clk.Now()
		for k := range simSlices {
			for i := range members {
				if left[i] == 0 {
					continue
				}
				g, _ := own[i].TryAcquire(left[i])
				if g.Tokens == 0 {
					continue
				}
				gg, _ := grp[i].TryAcquire(g.Tokens)
				own[i].Settle(g, gg.Tokens)
				ep.Sent[i] += int64(gg.Tokens)
				left[i] -= gg.Tokens
			}
			if k == 0 {
				ep.GroupPoolMilli = grp[0].Status().PoolMilli
			}
			clk.Set(start.Add(time.Duration(k+1) * ratelimit.DefaultSyncInterval))
		}
		for i := range members {
			st := grp[i].Status()
			ep.Lent[i], ep.Borrowed[i] = st.Lent-lent0[i], st.Borrowed-borrowed0[i]
			lent0[i], borrowed0[i] = st.Lent, st.Borrowed
		}
		out[e] = ep
	}
	return out, nil
}

// WriteGroupTable writes the group's limit and then, per epoch, the group's
// pool, what each member sent, the sum, and the tokens lent and borrowed.
func WriteGroupTable(w io.Writer, name string, group ratelimit.Config, members []SimMember, epochs []SimGroupEpoch) error {
	fmt.Fprintf(w, "group %s: mode %s, min %d, max %d, ramp-up %v; members", name, group.Mode, group.Min, group.Max, group.RampUpDuration)
	for i, m := range members {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, "%s %s (max %d)", sep, m.Name, m.Config.Max)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "epoch\tgroup pool\t")
	for _, m := range members {
		fmt.Fprintf(tw, "%s\t", m.Name)
	}
	fmt.Fprintln(tw, "sum\tlent\tborrowed\t")
	for _, e := range epochs {
		fmt.Fprintf(tw, "%d\t%s\t", e.Epoch, formatMilli(e.GroupPoolMilli))
		var sum, lent, borrowed int64
		for i := range members {
			fmt.Fprintf(tw, "%d\t", e.Sent[i])
			sum, lent, borrowed = sum+e.Sent[i], lent+e.Lent[i], borrowed+e.Borrowed[i]
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t\n", sum, lent, borrowed)
	}
	return tw.Flush()
}
