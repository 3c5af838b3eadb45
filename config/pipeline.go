package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

func (c *checker) pipeline(p *Pipeline) {
	c.header(p.APIVersion, p.Metadata.Name)
	s := &p.Spec
	if s.Limits != nil {
		c.pipelineLimits("spec.limits", s.Limits)
	}
	if w := s.Watermark; w != nil {
		c.watermark("spec.watermark", w)
		for _, v := range s.Vertices {
			if w.Disabled && v.UDF != nil && v.UDF.GroupBy != nil {
				c.add("spec.watermark.disabled", "a reduce vertex (%s) closes its windows by the watermark", v.Name)
				break
			}
		}
	}
	c.sideInputs(s)
	kinds, ambiguous := c.vertices(p)
	in, out := c.edges(s, kinds)
	c.connected(s, kinds, in, out, ambiguous)
	c.oneGraph(s, kinds, ambiguous)
	c.reduceAfterCycle(s)
	if isb := s.ISB; isb != nil && isb.JetStream != nil {
		c.jetStream("spec.isb.jetstream", isb.JetStream)
	}
}

// vertices checks the pipeline's vertices and returns their kinds: kinds maps
// a vertex name to source, udf or sink, or to "" when the vertex is ambiguous
// (no kind, several, or a name used twice): edges to and from it are then not
// judged by kind, since its own problem is reported already. ambiguous reports
// whether any vertex is.
func (c *checker) vertices(p *Pipeline) (kinds map[string]string, ambiguous bool) {
	s := &p.Spec
	if len(s.Vertices) == 0 {
		c.add("spec.vertices", "needs at least one vertex")
	}
	kinds = map[string]string{}
	for i := range s.Vertices {
		v := &s.Vertices[i]
		path := fmt.Sprintf("spec.vertices[%d]", i)
		c.name(path+".name", v.Name)
		kind := c.vertex(path, v, p)
		if _, dup := kinds[v.Name]; dup && v.Name != "" {
			c.add(path+".name", "(%q) is used by another vertex", v.Name)
			kind = ""
		}
		kinds[v.Name] = kind
		ambiguous = ambiguous || kind == ""
	}
	return kinds, ambiguous
}

// edges checks the pipeline's edges against the vertices' kinds and returns
// the number of edges into (in) and out of (out) each vertex.
func (c *checker) edges(s *PipelineSpec, kinds map[string]string) (in, out map[string]int) {
	if len(s.Edges) == 0 && len(s.Vertices) > 0 {
		c.add("spec.edges", "needs at least one edge")
	}
	in, out = map[string]int{}, map[string]int{}
	pairs := map[[2]string]bool{}
	for i, e := range s.Edges {
		path := fmt.Sprintf("spec.edges[%d]", i)
		for _, end := range []struct{ field, name string }{{"from", e.From}, {"to", e.To}} {
			if end.name == "" {
				c.required(path + "." + end.field)
			} else if _, ok := kinds[end.name]; !ok {
				c.add(path+"."+end.field, "(%q) is not a vertex of the pipeline", end.name)
			}
		}
		if pairs[[2]string{e.From, e.To}] {
			c.add(path, "repeats the edge from %q to %q", e.From, e.To)
		}
		pairs[[2]string{e.From, e.To}] = true
		out[e.From]++
		in[e.To]++
		if kinds[e.To] == "source" {
			c.add(path+".to", "(%q) is a source; sources have no incoming edges", e.To)
		}
		if kinds[e.From] == "sink" {
			c.add(path+".from", "(%q) is a sink; sinks have no outgoing edges", e.From)
		}
		if e.Conditions != nil {
			c.conditions(path+".conditions", e.Conditions)
		}
	}
	return in, out
}

// connected checks that every vertex has the edges its kind needs, given the
// edges into and out of each, and that the pipeline has a source and a sink
// (unless a vertex is ambiguous, which is reported already).
func (c *checker) connected(s *PipelineSpec, kinds map[string]string, in, out map[string]int, ambiguous bool) {
	var sources, sinks int
	for i := range s.Vertices {
		v := &s.Vertices[i]
		path := fmt.Sprintf("spec.vertices[%d]", i)
		switch kinds[v.Name] {
		case "source":
			sources++
			if out[v.Name] == 0 && len(s.Edges) > 0 {
				c.add(path, "source %q has no outgoing edge", v.Name)
			}
		case "sink":
			sinks++
			if in[v.Name] == 0 && len(s.Edges) > 0 {
				c.add(path, "sink %q has no incoming edge", v.Name)
			}
		case "udf":
			if (in[v.Name] == 0 || out[v.Name] == 0) && len(s.Edges) > 0 {
				c.add(path, "udf %q needs incoming and outgoing edges", v.Name)
			}
		}
	}
	if len(s.Vertices) > 0 && !ambiguous && (sources == 0 || sinks == 0) {
		c.add("spec.vertices", "needs at least one source and one sink")
	}
}

// oneGraph checks that the pipeline is one connected graph, as Numaflow's
// controller does: it reports each group of vertices that no edge joins to
// the group of the first source. In one graph, it warns of the vertices that no
// source reaches (behind a cycle that nothing enters): Numaflow accepts them,
// and they never get a message. It judges nothing while a vertex is
// ambiguous or an edge names no vertex, which are reported already.
func (c *checker) oneGraph(s *PipelineSpec, kinds map[string]string, ambiguous bool) {
	if ambiguous || len(s.Vertices) == 0 {
		return
	}
	next, linked := map[string][]string{}, map[string][]string{}
	for _, e := range s.Edges {
		if _, ok := kinds[e.From]; !ok {
			return
		}
		if _, ok := kinds[e.To]; !ok {
			return
		}
		next[e.From] = append(next[e.From], e.To)
		linked[e.From] = append(linked[e.From], e.To)
		linked[e.To] = append(linked[e.To], e.From)
	}
	index := map[string]int{}
	for i, v := range s.Vertices {
		index[v.Name] = i
	}
	// inOrder returns the vertices of set in the order of spec.vertices.
	inOrder := func(set map[string]bool) []string {
		names := slices.Collect(maps.Keys(set))
		slices.SortFunc(names, func(a, b string) int { return index[a] - index[b] })
		return names
	}
	var groups [][]string
	grouped := map[string]bool{}
	for _, v := range s.Vertices {
		if !grouped[v.Name] {
			g := walk([]string{v.Name}, linked)
			maps.Copy(grouped, g)
			groups = append(groups, inOrder(g))
		}
	}
	if len(groups) > 1 {
		// The pipeline is the first group with a source; a vertex without
		// edges is reported already.
		main := 0
		for i, g := range groups {
			if slices.ContainsFunc(g, func(v string) bool { return kinds[v] == "source" }) {
				main = i
				break
			}
		}
		for i, g := range groups {
			if i != main && (len(g) > 1 || len(linked[g[0]]) > 0) {
				c.add(fmt.Sprintf("spec.vertices[%d]", index[g[0]]), "%s joined by no edge to the graph of vertex %q: a pipeline is one connected graph, "+
					"as Numaflow requires; join them by an edge, or give them a pipeline of their own", vertexList(g, "is", "are"), groups[main][0])
			}
		}
		return
	}
	var sources []string
	for _, v := range s.Vertices {
		if kinds[v.Name] == "source" {
			sources = append(sources, v.Name)
		}
	}
	reached := walk(sources, next)
	var unreached []string
	for _, v := range s.Vertices {
		if !reached[v.Name] {
			unreached = append(unreached, v.Name)
		}
	}
	if len(unreached) > 0 {
		they := "they never get"
		if len(unreached) == 1 {
			they = "it never gets"
		}
		c.warn(fmt.Sprintf("spec.vertices[%d]", index[unreached[0]]), "no source reaches %s: %s a message (Numaflow accepts such a pipeline)",
			vertexList(unreached, "", ""), they)
	}
}

// walk returns the vertices reached from start, start included, by the edges
// of next.
func walk(start []string, next map[string][]string) map[string]bool {
	seen := map[string]bool{}
	todo := slices.Clone(start)
	for len(todo) > 0 {
		v := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if !seen[v] {
			seen[v] = true
			todo = append(todo, next[v]...)
		}
	}
	return seen
}

// vertexList names vertices in a sentence: vertex "a", or vertices "a",
// "b" and "c", followed by the verb for one or for several, if any.
func vertexList(names []string, one, several string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	s, verb := "vertex "+quoted[0], one
	if len(names) > 1 {
		s, verb = "vertices "+strings.Join(quoted[:len(quoted)-1], ", ")+" and "+quoted[len(quoted)-1], several
	}
	if verb != "" {
		s += " " + verb
	}
	return s
}

// reduceAfterCycle reports each reduce vertex at or after a cycle, as
// Numaflow's controller does: a cycle brings messages back later than the
// watermark, to windows that may have closed.
func (c *checker) reduceAfterCycle(s *PipelineSpec) {
	next := map[string][]string{}
	for _, e := range s.Edges {
		next[e.From] = append(next[e.From], e.To)
	}
	// reach returns the vertices reachable from name by one edge or more.
	reach := func(name string) map[string]bool { return walk(next[name], next) }
	after := map[string]string{} // a vertex at or after a cycle: a vertex of that cycle
	for _, v := range s.Vertices {
		r := reach(v.Name)
		if !r[v.Name] {
			continue
		}
		for w := range r {
			if _, ok := after[w]; !ok || v.Name < after[w] {
				after[w] = v.Name
			}
		}
	}
	for i, v := range s.Vertices {
		if at, ok := after[v.Name]; ok && v.UDF != nil && v.UDF.GroupBy != nil {
			c.add(fmt.Sprintf("spec.vertices[%d].udf.groupBy", i), "reduce vertex %q is at or after the cycle through %q: "+
				"a cycle brings messages back after their windows may have closed; reduce before the cycle", v.Name, at)
		}
	}
}

// jetStream checks spec.isb.jetstream, at path.
func (c *checker) jetStream(path string, js *JetStreamISB) {
	if u, err := url.Parse(js.URL); js.URL == "" || err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
		c.add(path+".url", "(%q) must be nats://host:port or tls://host:port", js.URL)
	} else {
		c.urlPort(path+".url", js.URL, u)
	}
	for name, sec := range map[string]*SecretKeySelector{"user": js.User, "password": js.Password, "token": js.Token} {
		if sec != nil {
			c.secret(path+"."+name, sec)
		}
	}
	if js.AckWait != nil && js.AckWait.Duration <= 0 {
		c.add(path+".ackWait", "(%v) must be positive", js.AckWait.Duration)
	}
	if js.FrameSize != nil && (*js.FrameSize < 1 || *js.FrameSize > MaxJetStreamFrameSize) {
		c.add(path+".frameSize", "(%d) must be 1 to %d", *js.FrameSize, MaxJetStreamFrameSize)
	}
	if js.Duplicates != nil && js.Duplicates.Duration <= 0 {
		c.add(path+".duplicates", "(%v) must be positive", js.Duplicates.Duration)
	}
	if js.User != nil && js.Token != nil {
		c.add(path+".token", "set either user and password or token, not both")
	}
	if (js.User == nil) != (js.Password == nil) {
		c.add(path, "user and password go together")
	}
}

// vertex checks a pipeline vertex and returns its kind: source, udf, sink, or ""
// when it has none or several.
func (c *checker) vertex(path string, v *Vertex, p *Pipeline) string {
	var kinds []string
	if v.Source != nil {
		kinds = append(kinds, "source")
		c.source(path+".source", v.Source)
	}
	if v.UDF != nil {
		kinds = append(kinds, "udf")
		c.udf(path+".udf", v.UDF)
	}
	if v.Sink != nil {
		kinds = append(kinds, "sink")
		c.sink(path+".sink", v.Sink)
	}
	kind := ""
	if len(kinds) == 1 {
		kind = kinds[0]
	} else {
		c.add(path, "set exactly one of source, udf and sink")
	}
	if l := v.Limits; l != nil {
		// The rate limit checked is the vertex's merged with the pipeline's.
		own := *l
		own.RateLimit = nil
		c.pipelineLimits(path+".limits", &own)
		if l.RateLimit != nil {
			merged, _ := p.VertexRateLimit(v.Name)
			if merged == nil {
				merged = l.RateLimit
			}
			c.rateLimit(path+".limits.rateLimit", merged)
		}
	}
	switch n := v.Partitions; {
	case n == nil:
	case *n < 1:
		c.add(path+".partitions", "(%d) must be at least 1", *n)
	case *n > 1 && v.UDF != nil && v.UDF.GroupBy != nil && !v.UDF.GroupBy.GetKeyed():
		c.add(path+".partitions", "(%d) must be 1 for a reduce that is not keyed: every message of a window meets in one partition; "+
			"set udf.groupBy.keyed: true to reduce each key set on its own", *n)
	}
	c.vertexSideInputs(path, v, p.Spec.SideInputs)
	c.scale(path+".scale", v.Scale)
	c.ordered(path, v, p)
	return kind
}

func (c *checker) pipelineLimits(path string, l *PipelineLimits) {
	c.limits(path, &l.Limits)
	if l.BufferMaxLength != nil && *l.BufferMaxLength < 1 {
		c.add(path+".bufferMaxLength", "(0) must be at least 1")
	}
	if l.BufferUsageLimit != nil && (*l.BufferUsageLimit < 1 || *l.BufferUsageLimit > 100) {
		c.add(path+".bufferUsageLimit", "(%d) must be a percentage between 1 and 100", *l.BufferUsageLimit)
	}
}

func (c *checker) conditions(path string, e *EdgeConditions) {
	if e.Tags == nil {
		c.required(path + ".tags")
		return
	}
	if len(e.Tags.Values) == 0 {
		c.add(path+".tags.values", "needs at least one tag")
	}
}

// Vertex returns the pipeline's vertex called name, or nil.
func (p *Pipeline) Vertex(name string) *Vertex {
	for i := range p.Spec.Vertices {
		if p.Spec.Vertices[i].Name == name {
			return &p.Spec.Vertices[i]
		}
	}
	return nil
}

// VertexLimits returns the limits of a pipeline vertex: its own, with what it
// leaves out taken from the pipeline's, and the rate limit merged as
// [Pipeline.VertexRateLimit] does. The Get methods of the result give the
// defaults of what neither sets.
func (p *Pipeline) VertexLimits(vertex string) (*PipelineLimits, error) {
	v := p.Vertex(vertex)
	if v == nil {
		return nil, fmt.Errorf("no vertex %q in pipeline %q", vertex, p.Metadata.Name)
	}
	var out PipelineLimits
	if p.Spec.Limits != nil {
		out = *p.Spec.Limits
	}
	if l := v.Limits; l != nil {
		if l.ReadBatchSize != nil {
			out.ReadBatchSize = l.ReadBatchSize
		}
		if l.ReadTimeout != nil {
			out.ReadTimeout = l.ReadTimeout
		}
		if l.UDFTimeout != nil {
			out.UDFTimeout = l.UDFTimeout
		}
		if l.BufferMaxLength != nil {
			out.BufferMaxLength = l.BufferMaxLength
		}
		if l.BufferUsageLimit != nil {
			out.BufferUsageLimit = l.BufferUsageLimit
		}
	}
	rl, err := p.VertexRateLimit(vertex)
	if err != nil {
		return nil, err
	}
	out.RateLimit = rl
	return &out, nil
}

// VertexRateLimit returns the rate limit of a pipeline vertex: the vertex's own,
// with max, min, rampUpDuration and store it leaves out taken from the
// pipeline's; or the pipeline's when the vertex has none. With vertex "" it
// returns the pipeline's. It returns nil when neither has a rate limit.
func (p *Pipeline) VertexRateLimit(vertex string) (*RateLimit, error) {
	var pipe *RateLimit
	if p.Spec.Limits != nil {
		pipe = p.Spec.Limits.RateLimit
	}
	if vertex == "" {
		return pipe, nil
	}
	for i := range p.Spec.Vertices {
		v := &p.Spec.Vertices[i]
		if v.Name != vertex {
			continue
		}
		if v.Limits == nil || v.Limits.RateLimit == nil {
			return pipe, nil
		}
		own := *v.Limits.RateLimit
		if pipe != nil {
			if own.Max == nil {
				own.Max = pipe.Max
			}
			if own.Min == nil {
				own.Min = pipe.Min
			}
			if own.RampUpDuration == nil {
				own.RampUpDuration = pipe.RampUpDuration
			}
			if own.Store == nil {
				own.Store = pipe.Store
			}
		}
		return &own, nil
	}
	return nil, fmt.Errorf("no vertex %q in pipeline %q", vertex, p.Metadata.Name)
}

// watermark checks spec.watermark.
func (c *checker) watermark(path string, w *Watermark) {
	if d := w.MaxDelay; d != nil && d.Duration < 0 {
		c.add(path+".maxDelay", "(%v) must not be negative", d.Duration)
	}
	if i := w.IdleSource; i != nil {
		c.positive(path+".idleSource.threshold", i.Threshold)
		c.positive(path+".idleSource.incrementBy", i.IncrementBy)
		if d := i.StepInterval; d != nil && d.Duration < 0 {
			c.add(path+".idleSource.stepInterval", "(%v) must not be negative", d.Duration)
		}
		// Numaflow's rules: the threshold is at least a step, and a source
		// is given at least the threshold before it counts as idle.
		if i.Threshold != nil && i.IncrementBy != nil && i.IncrementBy.Duration > 0 && i.Threshold.Duration < i.IncrementBy.Duration {
			c.add(path+".idleSource.threshold", "(%v) must be at least incrementBy (%v)", i.Threshold.Duration, i.IncrementBy.Duration)
		}
		switch d := i.InitSourceDelay; {
		case d == nil:
		case d.Duration <= 0:
			c.add(path+".idleSource.initSourceDelay", "(%v) must be positive", d.Duration)
		case i.Threshold != nil && d.Duration < i.Threshold.Duration:
			c.add(path+".idleSource.initSourceDelay", "(%v) must be at least the threshold (%v)", d.Duration, i.Threshold.Duration)
		}
	}
}
