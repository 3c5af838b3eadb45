package vertexconfig

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
	"github.com/sluiceflow/sluice/pkg/isb/route"
	"github.com/sluiceflow/sluice/pkg/kafka"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/reduce"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// Check is the runtime's validation of a decoded config, which [Load] and
// [Parse] run after the schema's: the built-in transformers, map functions
// and reducers it names, the properties of its Kafka clients, its rate limits
// by the limiter's own rules, and the throttle signals of adaptive. It
// reports each problem at its YAML path through r.
func Check(f *config.File, r config.Reporter) {
	c := checker{r}
	if m := f.MonoVertex; m != nil {
		s := &m.Spec
		c.vertex("spec", s.Source, s.UDF, s.Sink)
		if b := s.Bypass; b != nil {
			for name, e := range map[string]*config.EdgeConditions{"sink": b.Sink, "fallback": b.Fallback, "onSuccess": b.OnSuccess} {
				if e != nil && e.Tags != nil {
					c.enum("spec.bypass."+name+".tags.operator", e.Tags.Operator, parseErr[route.Operator])
				}
			}
		}
		if s.Limits != nil && s.Limits.RateLimit != nil {
			c.rateLimit("spec.limits.rateLimit", s.Limits.RateLimit)
		}
		return
	}
	p := f.Pipeline
	if l := p.Spec.Limits; l != nil && l.RateLimit != nil {
		c.rateLimit("spec.limits.rateLimit", l.RateLimit)
	}
	if isb := p.Spec.ISB; isb != nil && isb.JetStream != nil {
		c.enum("spec.isb.jetstream.storage", isb.JetStream.Storage, parseErr[jetstream.Storage])
	}
	for i := range p.Spec.Edges {
		e := &p.Spec.Edges[i]
		path := fmt.Sprintf("spec.edges[%d]", i)
		c.enum(path+".onFull", e.OnFull, parseErr[route.OnFull])
		if e.Conditions != nil && e.Conditions.Tags != nil {
			c.enum(path+".conditions.tags.operator", e.Conditions.Tags.Operator, parseErr[route.Operator])
		}
	}
	for i := range p.Spec.Vertices {
		v := &p.Spec.Vertices[i]
		path := fmt.Sprintf("spec.vertices[%d]", i)
		c.vertex(path, v.Source, v.UDF, v.Sink)
		if v.Limits != nil && v.Limits.RateLimit != nil {
			// The rate limit checked is the vertex's merged with the pipeline's.
			merged, _ := p.VertexRateLimit(v.Name)
			if merged == nil {
				merged = v.Limits.RateLimit
			}
			c.rateLimit(path+".limits.rateLimit", merged)
		}
	}
}

// checker reports the runtime's problems with a config.
type checker struct{ r config.Reporter }

// vertex checks the functions and connectors of the vertex at path; any of
// its parts may be nil.
func (c checker) vertex(path string, src *config.Source, u *config.UDF, sink *config.Sink) {
	if src != nil {
		if t := src.Transformer; t != nil && t.Container == nil && t.Builtin != nil {
			_, err := udf.NewBuiltinTransformer(t.Builtin.Name, t.Builtin.KWArgs, nil)
			c.builtin(path+".source.transformer", err)
		}
		if k := src.Kafka; k != nil {
			c.kafkaConfig(path+".source.kafka.config", k.Config, kafka.RoleSource)
		}
		if j := src.JetStream; j != nil {
			c.enum(path+".source.jetstream.deliver_policy", &j.DeliverPolicy, parseErr[jsconsumer.DeliverFrom])
		}
	}
	if u != nil && u.Container == nil && u.Builtin != nil {
		var err error
		if u.GroupBy != nil {
			_, err = reduce.Builtin(u.Builtin.Name, u.Builtin.KWArgs)
		} else {
			_, err = udf.NewBuiltin(u.Builtin.Name, u.Builtin.KWArgs, nil)
		}
		c.builtin(path+".udf", err)
	}
	if sink != nil {
		if k := sink.Kafka; k != nil {
			c.kafkaConfig(path+".sink.kafka.config", k.Config, kafka.RoleSink)
		}
		if fb := sink.Fallback; fb != nil && fb.Kafka != nil {
			c.kafkaConfig(path+".sink.fallback.kafka.config", fb.Kafka.Config, kafka.RoleSink)
		}
		if ons := sink.OnSuccess; ons != nil && ons.Kafka != nil {
			c.kafkaConfig(path+".sink.onSuccess.kafka.config", ons.Kafka.Config, kafka.RoleSink)
		}
		c.onFailure(path+".sink", sink)
	}
}

// enum reports the error of parsing the enumeration named name at path; a
// nil name is unset and fine.
func (c checker) enum(path string, name *string, parseErr func(*string) error) {
	if err := parseErr(name); err != nil {
		c.r.Add(path, "(%q): %v", *name, err)
	}
}

// onFailure checks the retryStrategy.onFailure of the sink at path: a name
// forward.OnFailure takes, and a fallback sink when it says fallback.
func (c checker) onFailure(path string, s *config.Sink) {
	r := s.RetryStrategy
	if r == nil || r.OnFailure == nil {
		return
	}
	if err := parseErr[forward.OnFailure](r.OnFailure); err != nil {
		c.r.Add(path+".retryStrategy.onFailure", "(%q): %v", *r.OnFailure, err)
		return
	}
	if f, _ := OnFailure(r); f == forward.Fallback && s.Fallback == nil {
		c.r.Add(path+".retryStrategy.onFailure", "(fallback) needs a fallback sink: set %s", path+".fallback")
	}
}

// builtin reports the error of making the built-in function at path: under
// the kwarg it blames, or under its name.
func (c checker) builtin(path string, err error) {
	if err == nil {
		return
	}
	var ke *udf.KWArgError
	if errors.As(err, &ke) {
		c.r.Add(path+".builtin.kwargs."+ke.Key, "%s", firstLine(ke.Err))
		return
	}
	c.r.Add(path+".builtin.name", "%s", firstLine(err))
}

// kafkaConfig checks a Kafka client's flat config at path: its syntax, and
// the values of the properties sluice applies for role.
func (c checker) kafkaConfig(path, s string, role kafka.Role) {
	p, err := kafka.ParseProperties(s)
	if err == nil {
		err = p.Check(role)
	}
	if err != nil {
		c.r.Add(path, "%v", err)
	}
}

// rateLimit checks the rateLimit block at path by the limiter's rules, and
// the throttle signals of its adaptive block.
func (c checker) rateLimit(path string, r *config.RateLimit) {
	c.enum(path+".onStoreFailure", r.OnStoreFailure, parseErr[ratelimit.StoreFailurePolicy])
	if r.PerKey != nil {
		c.enum(path+".perKey.keys", r.PerKey.Keys, parseErr[ratelimit.KeyMode])
	}
	c.limiterConfig(path, r)
	c.bytesAndCost(path, r)
	c.groups(path, r)
	c.regions(path, r)
	if a := r.Adaptive; a != nil && a.Signals != nil {
		if len(a.Signals) == 0 {
			c.r.Add(path+".adaptive.signals", "is empty; list the signals that cut the limit (%s), or leave it out for all", signalNames())
		}
		for i, s := range a.Signals {
			var kind isb.SignalKind
			switch {
			case kind.UnmarshalText([]byte(s)) != nil:
				c.r.Add(fmt.Sprintf("%s.adaptive.signals[%d]", path, i), "(%q) is not a signal; use %s", s, signalNames())
			case slices.Index(a.Signals, s) < i:
				c.r.Add(fmt.Sprintf("%s.adaptive.signals[%d]", path, i), "(%q) is listed twice", s)
			}
		}
	}
}

// poolName matches a group's or a region's name: it goes into the store's
// keys.
var poolName = regexp.MustCompile(`^[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?$`)

// groups checks the shared limits of the rateLimit block at path.
func (c checker) groups(path string, r *config.RateLimit) {
	if len(r.Groups) > 0 && r.Store != nil && r.Store.ReplicaCountStore != nil {
		c.r.Add(path+".groups", "need a redisStore, or no store for the vertices of one process: replicaCountStore shares nothing among vertices")
	}
	seen := map[string]bool{}
	for i, g := range r.Groups {
		p := fmt.Sprintf("%s.groups[%d]", path, i)
		switch {
		case g.Name == "":
			c.r.Add(p+".name", "is required")
		case !poolName.MatchString(g.Name):
			c.r.Add(p+".name", "(%q) must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", g.Name)
		case seen[g.Name]:
			c.r.Add(p+".name", "(%q) is listed twice", g.Name)
		}
		seen[g.Name] = true
		cfg := GroupConfig(&g)
		switch {
		case g.Max == nil:
			c.r.Add(p+".max", "is required: the group's limit, all its members together")
			cfg.Max = ratelimit.MaxTokens
		case *g.Max > ratelimit.MaxTokens:
			c.r.Add(p+".max", "(%d) must be at most %d", *g.Max, int64(ratelimit.MaxTokens))
			cfg.Max = ratelimit.MaxTokens
		}
		c.limiterErrors(p, cfg, g.Max, true)
	}
}

// regions checks the regions block of the rateLimit block at path.
func (c checker) regions(path string, r *config.RateLimit) {
	rg := r.Regions
	if rg == nil {
		return
	}
	p := path + ".regions"
	if r.Store != nil && r.Store.ReplicaCountStore != nil {
		c.r.Add(p, "needs a redisStore: replicaCountStore lends nothing among regions")
	}
	if len(rg.Proportions) == 0 {
		c.r.Add(p+".proportions", "is empty; give each region a weight, such as {eu-west: 50, us-east: 50}")
		return
	}
	names := slices.Sorted(maps.Keys(rg.Proportions))
	for _, name := range names {
		switch w := rg.Proportions[name]; {
		case !poolName.MatchString(name):
			c.r.Add(p+".proportions", "region %q must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", name)
		case w == 0:
			c.r.Add(p+".proportions."+name, "(0) must be at least 1")
		}
	}
	if r.Max != nil && *r.Max <= ratelimit.MaxTokens {
		weights := map[string]int{}
		for name, w := range rg.Proportions {
			weights[name] = clampInt(w)
		}
		for _, name := range names {
			if m := vertex.RegionShare(clampInt64(*r.Max), weights, name); m < 1 && weights[name] > 0 {
				c.r.Add(p+".proportions."+name, "(%d) gives the region no token of max (%d): raise max or the weight", weights[name], *r.Max)
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

// limiterConfig checks the fields of r that make the rate limiter's config with
// the limiter's own validation, and reports its errors under their YAML paths.
func (c checker) limiterConfig(path string, r *config.RateLimit) {
	cfg := LimiterConfig(r)
	if r.Max == nil {
		// Check the rest against the largest max: "max is required" is the
		// schema's to say.
		cfg.Max = ratelimit.MaxTokens
	} else if *r.Max > ratelimit.MaxTokens {
		c.r.Add(path+".max", "(%d) must be at most %d", *r.Max, int64(ratelimit.MaxTokens))
		cfg.Max = ratelimit.MaxTokens
	}
	c.limiterErrors(path, cfg, r.Max, false)
}

// limiterErrors reports the errors of the limiter's validation of cfg, made
// from the block at path whose max is max (a group's when group), under
// their YAML paths.
func (c checker) limiterErrors(path string, cfg ratelimit.Config, max *uint64, group bool) {
	for _, err := range unjoin(cfg.Validate()) {
		var fe *ratelimit.FieldError
		if !errors.As(err, &fe) {
			c.r.Add(path, "%v", err)
			continue
		}
		if (fe.Field == "Max" || fe.Other == "Max") && (max == nil || *max > ratelimit.MaxTokens) {
			continue // max itself is the problem, reported above
		}
		if fe.Field == "StaleAfter" {
			continue // staleAfter must be positive, which the schema checks
		}
		msg := fmt.Sprintf("(%v) %s", fe.Value, fe.Reason)
		if fe.Other != "" {
			msg += fmt.Sprintf(" %s (%v)", limiterPath(fe.Other, cfg.Mode), fe.OtherValue)
		}
		field := limiterPath(fe.Field, cfg.Mode)
		if group && fe.Field == "ReservePercentage" {
			field = "reservePercentage"
		}
		c.r.Add(path+"."+field, "%s", msg)
	}
}

// limiterPath returns the YAML path in a rateLimit block, under mode m, of
// the rate limiter's field named field: "modes.goBackN.coolDownPeriod".
func limiterPath(field string, m ratelimit.Mode) string {
	if f, ok := ratelimit.FieldOf(field); ok {
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

// bytesAndCost checks the byte limit (bytes) of the rateLimit block at path
// by the limiter's rules, and compiles its cost expression.
func (c checker) bytesAndCost(path string, r *config.RateLimit) {
	if b := r.Bytes; b != nil {
		switch {
		case b.Max == nil:
			c.r.Add(path+".bytes.max", "is required: the most payload bytes per second")
		case *b.Max < 1 || *b.Max > ratelimit.MaxTokens:
			c.r.Add(path+".bytes.max", "(%d) must be between 1 and %d", *b.Max, int64(ratelimit.MaxTokens))
		case b.GetMin() > *b.Max:
			c.r.Add(path+".bytes.min", "(%d) > bytes.max (%d)", b.GetMin(), *b.Max)
		}
	}
	if r.Cost != nil {
		if _, err := Cost(r); err != nil {
			c.r.Add(path+".cost", "(%q) is not a cost expression: %s", *r.Cost, firstLine(err))
		}
	}
}
