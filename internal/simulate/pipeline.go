package simulate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// GroupOf returns the vertices of p that join the shared limit group
// (rateLimit.groups) as members of a [SimulateGroup] run, in the order of
// the vertices, each with its own limit and no demand, and the group's
// config, from the first member's block of it; ok is false when no vertex
// joins it.
func GroupOf(p *config.Pipeline, group string) (cfg ratelimit.Config, members []SimMember, ok bool) {
	for _, v := range p.Spec.Vertices {
		rl, err := p.VertexRateLimit(v.Name)
		if err != nil || rl == nil {
			continue
		}
		for i := range rl.Groups {
			if g := &rl.Groups[i]; g.Name == group {
				if !ok {
					cfg, ok = vertexconfig.GroupConfig(g), true
				}
				members = append(members, SimMember{Name: v.Name, Config: vertexconfig.LimiterConfig(rl)})
			}
		}
	}
	return cfg, members, ok
}

// SetDemands gives members the demands of demandOf, "VERTEX=LIST" each
// ([ParseDemand] reads LIST), and returns the epochs of the longest, 0 with
// none. An error names the entry: `("x=1"): want VERTEX=LIST, VERTEX one
// of a, b`.
func SetDemands(members []SimMember, demandOf []string) (epochs int, err error) {
	for _, arg := range demandOf {
		name, list, ok := strings.Cut(arg, "=")
		i := slices.IndexFunc(members, func(m SimMember) bool { return m.Name == name })
		if !ok || i < 0 {
			return 0, fmt.Errorf("(%q): want VERTEX=LIST, VERTEX one of %s", arg, MemberNames(members))
		}
		d, err := ParseDemand(list)
		if err != nil {
			return 0, fmt.Errorf("(%q): %v", arg, err)
		}
		members[i].Demand = d
		epochs = max(epochs, len(d))
	}
	return epochs, nil
}

// MemberNames lists the members' names: "a, b".
func MemberNames(ms []SimMember) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}
