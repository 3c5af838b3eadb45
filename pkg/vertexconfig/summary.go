package vertexconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// Summary describes a valid config in a few words: for a MonoVertex, its
// source, transformer, UDF and sink in order, each user-defined container named
// by its image (or its command when it has no image), and its rate limit; for a
// Pipeline, the same for each vertex. `vertex validate` prints it.
//
//	udsource my/source:v1 → transformer my/tr:v1 → udf my/map:v1 → udsink my/sink:v1; rate limit 20/s from 5 over 5s, relaxed
//	generator → udf my/map:v1 → blackhole; rate limit 2000/s from 2000 over 0s, relaxed; streaming, 500 in flight
//	generator → log; rate limit 100/s from 100 over 0s, relaxed, per key 10/s
//	generator → log; rate limit 100/s from 1 over 1s, relaxed, bytes 1000000/s from 10000, cost len(payload)
//	3 vertices, 2 edges; in: generator; even: filter; out: log
//	3 vertices, 2 edges; in: http; sum: reduce my/sum:v1 (sliding 1m0s every 10s, keyed); out: log
//	3 vertices, 2 edges; in: generator; tag: udf my/map:v1 (side inputs ticker); out: log; side input ticker: container my/ticker:v1 on "*/5 * * * *"
//	3 vertices, 2 edges; in: http; cat: cat (ordered, 3 partitions); out: log (ordered, 3 partitions)
func Summary(f *config.File) string {
	if m := f.MonoVertex; m != nil {
		spec := &m.Spec
		s := flow(spec.Source, spec.UDF, spec.Sink)
		if rl := spec.Limits.GetRateLimit(); rl != nil {
			c := LimiterConfig(rl)
			s += fmt.Sprintf("; rate limit %d/s from %d over %v, %s", c.Max, c.Min, c.RampUpDuration, c.Mode)
			if rl.IsShadow() {
				s += ", shadow"
			}
			s += perKeySummary(rl)
			s += bytesSummary(rl) + groupsSummary(rl)
		}
		if spec.Streaming != nil && *spec.Streaming {
			s += fmt.Sprintf("; streaming, %d in flight", spec.Limits.GetConcurrency())
		}
		return s
	}
	spec := &f.Pipeline.Spec
	s := fmt.Sprintf("%d vertices, %d edges", len(spec.Vertices), len(spec.Edges))
	for _, v := range spec.Vertices {
		s += "; " + v.Name + ": " + flow(v.Source, v.UDF, v.Sink)
		if len(v.SideInputs) > 0 {
			s += " (side inputs " + strings.Join(v.SideInputs, ", ") + ")"
		}
		if f.Pipeline.VertexOrdered(v.Name) {
			n := int32(1)
			if v.Partitions != nil {
				n = *v.Partitions
			}
			s += fmt.Sprintf(" (ordered, %d partition%s)", n, map[bool]string{true: "s"}[n > 1])
		}
	}
	for _, si := range spec.SideInputs {
		s += fmt.Sprintf("; side input %s: %s on %q", si.Name, describeContainer("container", si.Container), si.Trigger.Schedule)
		if tz := si.Trigger.Timezone; tz != nil && *tz != "" {
			s += " in " + *tz
		}
	}
	return s
}

// flow describes what a vertex runs, in order; any of its parts may be nil.
func flow(src *config.Source, udf *config.UDF, sink *config.Sink) string {
	var steps []string
	if src != nil {
		steps = append(steps, sourceKind(src))
		if tr := src.Transformer; tr != nil {
			steps = append(steps, function("transformer", tr.Container, tr.Builtin))
		}
	}
	switch {
	case udf != nil && udf.GroupBy != nil:
		steps = append(steps, reduceSummary(udf))
	case udf != nil:
		steps = append(steps, function("udf", udf.Container, udf.Builtin))
	}
	if sink != nil {
		s := sinkKind(&sink.AbstractSink)
		if sink.Fallback != nil {
			s += ", fallback " + sinkKind(sink.Fallback)
		}
		if sink.OnSuccess != nil {
			s += ", on success " + sinkKind(sink.OnSuccess)
		}
		steps = append(steps, s)
	}
	return strings.Join(steps, " → ")
}

// reduceSummary describes a reduce: its function, window, keying, lateness
// and storage: "reduce count (fixed 1m0s, keyed, late 5s, no_store)".
func reduceSummary(u *config.UDF) string {
	s := describeContainer("reduce", u.Container)
	if u.Builtin != nil {
		s = "reduce " + u.Builtin.Name
	}
	g := u.GroupBy
	var w []string
	switch f, sl, se := g.Window.Fixed, g.Window.Sliding, g.Window.Session; {
	case f != nil:
		w = append(w, "fixed "+f.Length.Duration.String())
	case sl != nil:
		w = append(w, "sliding "+sl.Length.Duration.String()+" every "+sl.Slide.Duration.String())
	case se != nil:
		w = append(w, "session "+se.Timeout.Duration.String())
	}
	if g.GetKeyed() {
		w = append(w, "keyed")
	}
	if l := g.GetAllowedLateness(); l > 0 {
		w = append(w, "late "+l.String())
	}
	if g.Storage != nil && g.Storage.NoStore != nil {
		w = append(w, "no_store")
	}
	return s + " (" + strings.Join(w, ", ") + ")"
}

func sourceKind(s *config.Source) string {
	switch {
	case s.Generator != nil:
		return "generator"
	case s.HTTP != nil:
		return "http"
	case s.Kafka != nil:
		return "kafka " + s.Kafka.Topic
	case s.Nats != nil:
		return "nats " + s.Nats.Subject
	case s.JetStream != nil:
		return "jetstream " + s.JetStream.Stream
	case s.SQS != nil:
		return "sqs " + s.SQS.QueueName
	default:
		return userDefined("udsource", s.UDSource)
	}
}

func sinkKind(s *config.AbstractSink) string {
	switch {
	case s.Log != nil:
		return "log"
	case s.Blackhole != nil:
		return "blackhole"
	case s.Kafka != nil:
		return "kafka " + s.Kafka.Topic
	case s.HTTP != nil:
		return "http " + s.HTTP.URL
	case s.SQS != nil:
		return "sqs " + s.SQS.QueueName
	default:
		return userDefined("udsink", s.UDSink)
	}
}

// function names a built-in by its name, and a container as what it is.
func function(what string, c *config.Container, b *config.Builtin) string {
	if b != nil {
		return b.Name
	}
	return describeContainer(what, c)
}

func userDefined(what string, u *config.UDContainer) string {
	if u == nil {
		return what
	}
	return describeContainer(what, u.Container)
}

// describeContainer is what followed by the container's image, or by its command line
// when it has no image (quoted when it has spaces).
func describeContainer(what string, c *config.Container) string {
	if c == nil {
		return what
	}
	if c.Image != "" {
		return what + " " + c.Image
	}
	cmd := strings.Join(append(slices.Clip(c.Command), c.Args...), " ")
	if strings.ContainsAny(cmd, " \t") {
		cmd = strconv.Quote(cmd)
	}
	return what + " " + cmd
}

// groupsSummary describes a rate limit's regions and shared limits, if
// any: ", regions eu 60, us 40, in group partner-api 300/s".
func groupsSummary(rl *config.RateLimit) string {
	s := ""
	if r := rl.Regions; r != nil {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(r.Proportions)) {
			parts = append(parts, fmt.Sprintf("%s %d", name, r.Proportions[name]))
		}
		s += ", regions " + strings.Join(parts, ", ")
	}
	for _, g := range rl.Groups {
		s += fmt.Sprintf(", in group %s %d/s", g.Name, GroupConfig(&g).Max)
	}
	return s
}

// perKeySummary describes a rate limit's per-key limit, if any: ", per key
// 50/s", and "of all keys" when the whole key list counts.
func perKeySummary(rl *config.RateLimit) string {
	if rl.PerKey == nil {
		return ""
	}
	s := fmt.Sprintf(", per key %d/s", KeyConfig(rl).Max)
	if KeyMode(rl.PerKey) == ratelimit.AllKeys {
		s += " of all keys"
	}
	return s
}

// bytesSummary describes the byte limit and the cost of a rateLimit block:
// ", bytes 1000000/s from 10000, cost len(payload)", or "".
func bytesSummary(rl *config.RateLimit) string {
	var s string
	if c := ByteConfig(rl); c != nil {
		s += fmt.Sprintf(", bytes %d/s from %d", c.Max, c.Min)
	}
	if rl.Cost != nil {
		s += ", cost " + *rl.Cost
	}
	return s
}
