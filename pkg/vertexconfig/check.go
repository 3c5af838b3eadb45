package vertexconfig

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/connectors/kafka"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
	"github.com/sluiceflow/sluice/pkg/isb/route"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/reduce"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// Check is the runtime's validation of a decoded config, which [Load] and
// [Parse] run after the schema's: the built-in transformers, map functions
// and reducers it names, the properties of its Kafka clients, its rate limits
// by the limiter's own rules, the throttle signals of adaptive, and the
// ranges of its scale blocks by the scaling rule's. It reports each
// problem at its YAML path through r.
func Check(f *config.File, r config.Reporter) {
	if m := f.MonoVertex; m != nil {
		s := &m.Spec
		checkVertex(r, "spec", s.Source, s.UDF, s.Sink)
		if b := s.Bypass; b != nil {
			for name, e := range map[string]*config.EdgeConditions{"sink": b.Sink, "fallback": b.Fallback, "onSuccess": b.OnSuccess} {
				if e != nil && e.Tags != nil {
					checkEnum(r, "spec.bypass."+name+".tags.operator", e.Tags.Operator, parseErr[route.Operator])
				}
			}
		}
		if s.Limits != nil && s.Limits.RateLimit != nil {
			checkRateLimit(r, "spec.limits.rateLimit", s.Limits.RateLimit)
		}
		checkScale(r, "spec.scale", s.Scale)
		return
	}
	p := f.Pipeline
	if l := p.Spec.Limits; l != nil && l.RateLimit != nil {
		checkRateLimit(r, "spec.limits.rateLimit", l.RateLimit)
	}
	if isb := p.Spec.ISB; isb != nil && isb.JetStream != nil {
		checkEnum(r, "spec.isb.jetstream.storage", isb.JetStream.Storage, parseErr[jetstream.Storage])
	}
	for i := range p.Spec.Edges {
		e := &p.Spec.Edges[i]
		path := fmt.Sprintf("spec.edges[%d]", i)
		checkEnum(r, path+".onFull", e.OnFull, parseErr[route.OnFull])
		if e.Conditions != nil && e.Conditions.Tags != nil {
			checkEnum(r, path+".conditions.tags.operator", e.Conditions.Tags.Operator, parseErr[route.Operator])
		}
	}
	for i := range p.Spec.Vertices {
		v := &p.Spec.Vertices[i]
		path := fmt.Sprintf("spec.vertices[%d]", i)
		checkVertex(r, path, v.Source, v.UDF, v.Sink)
		checkScale(r, path+".scale", v.Scale)
		if v.Limits != nil && v.Limits.RateLimit != nil {
			// The rate limit checked is the vertex's merged with the pipeline's.
			merged, _ := p.VertexRateLimit(v.Name)
			if merged == nil {
				merged = v.Limits.RateLimit
			}
			checkRateLimit(r, path+".limits.rateLimit", merged)
		}
	}
}

// checkVertex checks the functions and connectors of the vertex at path; any of
// its parts may be nil.
func checkVertex(r config.Reporter, path string, src *config.Source, u *config.UDF, sink *config.Sink) {
	if src != nil {
		if t := src.Transformer; t != nil && t.Container == nil && t.Builtin != nil {
			_, err := udf.NewBuiltinTransformer(t.Builtin.Name, t.Builtin.KWArgs, nil)
			checkBuiltin(r, path+".source.transformer", err)
		}
		if k := src.Kafka; k != nil {
			checkKafkaConfig(r, path+".source.kafka.config", k.Config, kafka.RoleSource)
		}
		if j := src.JetStream; j != nil {
			checkEnum(r, path+".source.jetstream.deliver_policy", &j.DeliverPolicy, parseErr[source.DeliverFrom])
		}
		if t := src.Transformer; t != nil {
			checkFunctionOnFailure(r, path+".source.transformer", t.RetryStrategy)
		}
	}
	if u != nil && u.GroupBy == nil {
		checkFunctionOnFailure(r, path+".udf", u.RetryStrategy)
	}
	if u != nil && u.Container == nil && u.Builtin != nil {
		var err error
		if u.GroupBy != nil {
			_, err = reduce.Builtin(u.Builtin.Name, u.Builtin.KWArgs)
		} else {
			_, err = udf.NewBuiltin(u.Builtin.Name, u.Builtin.KWArgs, nil)
		}
		checkBuiltin(r, path+".udf", err)
	}
	if sink != nil {
		if k := sink.Kafka; k != nil {
			checkKafkaConfig(r, path+".sink.kafka.config", k.Config, kafka.RoleSink)
		}
		if fb := sink.Fallback; fb != nil && fb.Kafka != nil {
			checkKafkaConfig(r, path+".sink.fallback.kafka.config", fb.Kafka.Config, kafka.RoleSink)
		}
		if ons := sink.OnSuccess; ons != nil && ons.Kafka != nil {
			checkKafkaConfig(r, path+".sink.onSuccess.kafka.config", ons.Kafka.Config, kafka.RoleSink)
		}
		checkOnFailure(r, path+".sink", sink)
	}
}

// checkEnum reports the error of parsing the enumeration named name at path; a
// nil name is unset and fine.
func checkEnum(r config.Reporter, path string, name *string, parseErr func(*string) error) {
	if err := parseErr(name); err != nil {
		r.Add(path, "(%q): %v", *name, err)
	}
}

// checkOnFailure checks the retryStrategy.onFailure of the sink at path: a name
// forward.OnFailure takes, and a fallback sink when it says fallback.
func checkOnFailure(r config.Reporter, path string, s *config.Sink) {
	rs := s.RetryStrategy
	if rs == nil || rs.OnFailure == nil {
		return
	}
	if err := parseErr[forward.OnFailure](rs.OnFailure); err != nil {
		r.Add(path+".retryStrategy.onFailure", "(%q): %v", *rs.OnFailure, err)
		return
	}
	if f, _ := OnFailure(rs); f == forward.Fallback && s.Fallback == nil {
		r.Add(path+".retryStrategy.onFailure", "(fallback) needs a fallback sink: set %s", path+".fallback")
	}
}

// checkFunctionOnFailure checks the retryStrategy.onFailure of the map or
// transformer at path: retry or drop. A function has no fallback: what it
// fails is tried again or dropped.
func checkFunctionOnFailure(r config.Reporter, path string, rs *config.RetryStrategy) {
	if rs == nil || rs.OnFailure == nil {
		return
	}
	if err := parseErr[forward.OnFailure](rs.OnFailure); err != nil {
		r.Add(path+".retryStrategy.onFailure", "(%q): unknown onFailure: want retry or drop", *rs.OnFailure)
		return
	}
	if f, _ := OnFailure(rs); f == forward.Fallback {
		r.Add(path+".retryStrategy.onFailure", "(fallback) is not supported for a map or a transformer: want retry or drop")
	}
}

// checkBuiltin reports the error of making the built-in function at path: under
// the kwarg it blames, or under its name.
func checkBuiltin(r config.Reporter, path string, err error) {
	if err == nil {
		return
	}
	var ke *udf.KWArgError
	if errors.As(err, &ke) {
		r.Add(path+".builtin.kwargs."+ke.Key, "%s", firstLine(ke.Err))
		return
	}
	r.Add(path+".builtin.name", "%s", firstLine(err))
}

// checkKafkaConfig checks a Kafka client's flat config at path: its syntax, and
// the values of the properties sluice applies for role.
func checkKafkaConfig(r config.Reporter, path, s string, role kafka.Role) {
	p, err := kafka.ParseProperties(s)
	if err == nil {
		err = p.Check(role)
	}
	if err != nil {
		r.Add(path, "%v", err)
	}
}

// checkRateLimit checks the rateLimit block at path by the limiter's rules,
// and the throttle signals of its adaptive block.
func checkRateLimit(r config.Reporter, path string, rl *config.RateLimit) {
	checkEnum(r, path+".onStoreFailure", rl.OnStoreFailure, parseErr[ratelimit.StoreFailurePolicy])
	if rl.PerKey != nil {
		checkEnum(r, path+".perKey.keys", rl.PerKey.Keys, parseErr[ratelimit.KeyMode])
	}
	cfg := LimiterConfig(rl)
	limiterErrors(r, limiterBlock{path: path, max: rl.Max, name: func(field string) string {
		if field == "StaleAfter" {
			return "" // staleAfter must be positive, which the schema checks
		}
		return limiterPath(field, cfg.Mode)
	}}, cfg.Validate())
	checkBytes(r, path, rl)
	checkCost(r, path, rl)
	checkGroups(r, path, rl)
	checkRegions(r, path, rl)
	if a := rl.Adaptive; a != nil && a.Signals != nil {
		if len(a.Signals) == 0 {
			r.Add(path+".adaptive.signals", "is empty; list the signals that cut the limit (%s), or leave it out for all", signalNames())
		}
		for i, s := range a.Signals {
			var kind isb.SignalKind
			switch {
			case kind.UnmarshalText([]byte(s)) != nil:
				r.Add(fmt.Sprintf("%s.adaptive.signals[%d]", path, i), "(%q) is not a signal; use %s", s, signalNames())
			case slices.Index(a.Signals, s) < i:
				r.Add(fmt.Sprintf("%s.adaptive.signals[%d]", path, i), "(%q) is listed twice", s)
			}
		}
	}
}

// limitName matches a group's or a region's name: it goes into the store's
// keys.
var limitName = regexp.MustCompile(`^[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?$`)

// checkGroups checks the shared limits of the rateLimit block at path.
func checkGroups(r config.Reporter, path string, rl *config.RateLimit) {
	if len(rl.Groups) > 0 && rl.Store != nil && rl.Store.ReplicaCountStore != nil {
		r.Add(path+".groups", "need a redisStore, or no store for the vertices of one process: replicaCountStore shares nothing among vertices")
	}
	seen := map[string]bool{}
	for i, g := range rl.Groups {
		p := fmt.Sprintf("%s.groups[%d]", path, i)
		switch {
		case g.Name == "":
			r.Add(p+".name", "is required")
		case !limitName.MatchString(g.Name):
			r.Add(p+".name", "(%q) must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", g.Name)
		case seen[g.Name]:
			r.Add(p+".name", "(%q) is listed twice", g.Name)
		}
		seen[g.Name] = true
		if g.Max == nil {
			r.Add(p+".max", "is required: the group's limit, all its members together")
		}
		cfg := GroupConfig(&g)
		limiterErrors(r, limiterBlock{path: p, max: g.Max, name: func(field string) string {
			if field == "ReservePercentage" {
				return "reservePercentage"
			}
			return limiterPath(field, cfg.Mode)
		}}, cfg.Validate())
	}
}

// checkRegions checks the regions block of the rateLimit block at path.
func checkRegions(r config.Reporter, path string, rl *config.RateLimit) {
	rg := rl.Regions
	if rg == nil {
		return
	}
	p := path + ".regions"
	if rl.Store != nil && rl.Store.ReplicaCountStore != nil {
		r.Add(p, "needs a redisStore: replicaCountStore lends nothing among regions")
	}
	if len(rg.Proportions) == 0 {
		r.Add(p+".proportions", "is empty; give each region a weight, such as {eu-west: 50, us-east: 50}")
		return
	}
	names := slices.Sorted(maps.Keys(rg.Proportions))
	for _, name := range names {
		switch w := rg.Proportions[name]; {
		case !limitName.MatchString(name):
			r.Add(p+".proportions", "region %q must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", name)
		case w == 0:
			r.Add(p+".proportions."+name, "(0) must be at least 1")
		}
	}
	if rl.Max != nil && *rl.Max <= ratelimit.MaxTokens {
		weights := map[string]int{}
		for name, w := range rg.Proportions {
			weights[name] = clampInt(w)
		}
		for _, name := range names {
			if m := vertex.RegionShare(clampInt64(*rl.Max), weights, name); m < 1 && weights[name] > 0 {
				r.Add(p+".proportions."+name, "(%d) gives the region no token of max (%d): raise max or the weight", weights[name], *rl.Max)
			}
		}
	}
}

// signalNames lists the names of the throttle signals: "http429, http503, ...".
func signalNames() string {
	names := make([]string, len(isb.Signals))
	for i, k := range isb.Signals {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}

// limiterBlock is a block of YAML that makes a limiter's config, for
// [limiterErrors].
type limiterBlock struct {
	path string
	// max is the block's max as written, nil when it is unset: "is
	// required" is the schema's (or the block's check's) to say.
	max *uint64
	// name returns the YAML path, under path, of the Config field named
	// field, or "" for a field whose errors the block leaves to others.
	name func(field string) string
	// maxReason, when set, says what is wrong with a max out of the
	// limiter's bounds, in the words of the block.
	maxReason string
}

// limiterErrors reports the errors of the limiter's validation of a config
// made from block b under their YAML paths: the limiter's rules are written
// once, in [ratelimit.Config.Validate], and this names each error's fields
// as the YAML does. A max out of bounds is given as written; an error that
// compares with a max that is itself wrong, or unset, is left out.
func limiterErrors(r config.Reporter, b limiterBlock, err error) {
	maxBad := b.max == nil || *b.max < 1 || *b.max > ratelimit.MaxTokens
	for _, err := range unjoin(err) {
		var fe *ratelimit.FieldError
		if !errors.As(err, &fe) {
			r.Add(b.path, "%v", err)
			continue
		}
		field := b.name(fe.Field)
		switch {
		case field == "" || fe.Other != "" && b.name(fe.Other) == "":
			continue
		case fe.Field == "Max" && b.max == nil, fe.Other == "Max" && maxBad:
			continue
		case fe.Field == "Max" && b.maxReason != "":
			r.Add(b.path+"."+field, "(%d) %s", *b.max, b.maxReason)
			continue
		case fe.Field == "Max":
			r.Add(b.path+"."+field, "(%d) %s", *b.max, fe.Reason)
			continue
		}
		msg := fmt.Sprintf("(%v) %s", fe.Value, fe.Reason)
		if fe.Other != "" {
			msg += fmt.Sprintf(" %s (%v)", b.name(fe.Other), fe.OtherValue)
		}
		r.Add(b.path+"."+field, "%s", msg)
	}
}

// limiterPath returns the YAML path in a rateLimit block, under mode m, of
// the rate limiter's field named field: "modes.goBackN.coolDownPeriod".
func limiterPath(field string, m ratelimit.Mode) string {
	if f, ok := RateLimitFieldOf(field); ok {
		return f.Path(m)
	}
	return field
}

// firstLine returns an error's first line: an expression's compile error goes on
// with the source and a caret, which a one-line problem leaves out.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// checkBytes checks the byte limit (bytes) of the rateLimit block at path
// by the limiter's rules, which the byte limiter's config (see [ByteConfig])
// takes its max and min from; its other fields are the block's, checked with
// it.
func checkBytes(r config.Reporter, path string, rl *config.RateLimit) {
	b := rl.Bytes
	if b == nil {
		return
	}
	if b.Max == nil {
		r.Add(path+".bytes.max", "is required: the most payload bytes per second")
		return
	}
	names := map[string]string{"Max": "bytes.max", "Min": "bytes.min"}
	limiterErrors(r, limiterBlock{path: path, max: b.Max, name: func(field string) string { return names[field] },
		maxReason: fmt.Sprintf("must be between 1 and %d", int64(ratelimit.MaxTokens))}, ByteConfig(rl).Validate())
}

// checkCost compiles the cost expression of the rateLimit block at path.
func checkCost(r config.Reporter, path string, rl *config.RateLimit) {
	if rl.Cost != nil {
		if _, err := Cost(rl); err != nil {
			r.Add(path+".cost", "(%q) is not a cost expression: %s", *rl.Cost, firstLine(err))
		}
	}
}
