package kafka

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Role says whether a client consumes (a source) or produces (a sink). The
// zero value is RoleSource.
type Role uint8

const (
	// RoleSource is a consumer in a consumer group.
	RoleSource Role = iota
	// RoleSink is a producer.
	RoleSink
)

// String returns "source" or "sink".
func (r Role) String() string {
	switch r {
	case RoleSource:
		return "source"
	case RoleSink:
		return "sink"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// UnmarshalText sets r from "source" or "sink" and rejects other names.
func (r *Role) UnmarshalText(b []byte) error {
	switch string(b) {
	case "source":
		*r = RoleSource
	case "sink":
		*r = RoleSink
	default:
		return fmt.Errorf("kafka: unknown role %q (want source or sink)", b)
	}
	return nil
}

// Properties are librdkafka-style client properties, such as
// "session.timeout.ms" or "linger.ms", each with its value as written.
type Properties map[string]string

// ParseProperties parses Numaflow's flat `config` string: one `key: value`
// per line, a YAML mapping of scalars. Blank lines and # comments are allowed.
// An empty string gives no properties. Errors name the line and the key.
func ParseProperties(s string) (Properties, error) {
	p := Properties{}
	if strings.TrimSpace(s) == "" {
		return p, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return nil, fmt.Errorf("%w: config: %v", ErrInvalidConfig, err)
	}
	if len(doc.Content) == 0 {
		return p, nil // comments only
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: config: line %d: want one `key: value` per line", ErrInvalidConfig, m.Line)
	}
	lines := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || strings.TrimSpace(k.Value) == "" {
			return nil, fmt.Errorf("%w: config: line %d: want a property name before the colon", ErrInvalidConfig, k.Line)
		}
		key := strings.TrimSpace(k.Value)
		switch {
		case v.Kind != yaml.ScalarNode:
			return nil, fmt.Errorf("%w: config: line %d: %s: want a single value, not a list or a mapping", ErrInvalidConfig, k.Line, key)
		case v.Tag == "!!null" && v.Value == "":
			return nil, fmt.Errorf("%w: config: line %d: %s has no value", ErrInvalidConfig, k.Line, key)
		}
		if first, dup := lines[key]; dup {
			return nil, fmt.Errorf("%w: config: line %d: %s is set again (first on line %d)", ErrInvalidConfig, k.Line, key, first)
		}
		lines[key] = k.Line
		p[key] = strings.TrimSpace(v.Value)
	}
	return p, nil
}

// Check reports the first property (in name order) whose value is invalid for
// role, naming the property and its value, then the first pair of properties
// that contradict each other. Properties it does not know are not errors (see
// [Properties.Unknown]). enable.auto.commit may only be false: sluice commits
// offsets itself, once messages are acked.
func (p Properties) Check(role Role) error {
	keys := p.sorted()
	for _, k := range keys {
		spec, ok := properties[k]
		if !ok || !spec.roles.has(role) {
			continue
		}
		if want := spec.valid(strings.TrimSpace(p[k])); want != "" {
			return configErr(role, "config property "+k, p[k], want)
		}
	}
	for _, k := range keys {
		spec, ok := properties[k]
		if !ok || spec.same == "" || !spec.roles.has(role) {
			continue
		}
		if v, both := p[spec.same]; both && !strings.EqualFold(strings.TrimSpace(v), strings.TrimSpace(p[k])) {
			return configErr(role, "config property "+k, p[k], "contradicts "+spec.same+" ("+strconv.Quote(v)+"): they are the same property; set one")
		}
	}
	if role == RoleSource {
		return p.checkSource()
	}
	return p.checkSink()
}

// Unknown returns, in name order, the properties that role does not use:
// those it ignores, to be warned about once.
func (p Properties) Unknown(role Role) []string {
	var out []string
	for _, k := range p.sorted() {
		if spec, ok := properties[k]; !ok || !spec.roles.has(role) {
			out = append(out, k)
		}
	}
	return out
}

func (p Properties) sorted() []string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// get returns the value of the property name or of its alias, trimmed.
func (p Properties) get(name string) (string, bool) {
	if v, ok := p[name]; ok {
		return strings.TrimSpace(v), true
	}
	for alias, spec := range properties {
		if spec.same == name {
			if v, ok := p[alias]; ok {
				return strings.TrimSpace(v), true
			}
		}
	}
	return "", false
}

// int returns the checked integer property name, or def when it is not set.
func (p Properties) int(name string, def int64) int64 {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

func (p Properties) checkSource() error {
	if _, ok := p.get("heartbeat.interval.ms"); ok {
		s, h := p.int("session.timeout.ms", defaultSessionTimeout.Milliseconds()), p.int("heartbeat.interval.ms", 0)
		if h >= s {
			return configErr(RoleSource, "config property heartbeat.interval.ms", strconv.FormatInt(h, 10),
				"must be less than session.timeout.ms ("+strconv.FormatInt(s, 10)+")")
		}
	}
	return nil
}

func (p Properties) checkSink() error {
	acks, _ := p.get("acks")
	idem, hasIdem := p.get("enable.idempotence")
	if (acks == "0" || acks == "1") && hasIdem && strings.EqualFold(idem, "true") {
		return configErr(RoleSink, "config property acks", acks,
			"needs enable.idempotence: false (an idempotent producer waits for all in-sync replicas)")
	}
	return nil
}
