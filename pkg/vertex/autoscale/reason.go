package autoscale

import "github.com/sluiceflow/sluice/internal/enum"

// Reason says why a [Decision] is the count it is.
type Reason uint8

const (
	// Steady, the zero value: the backlog asks for the count there is.
	Steady Reason = iota
	// Backlog: the count follows the backlog, up or down.
	Backlog
	// AtLimit: the backlog asks for more replicas than the rate limit's
	// pool keeps busy; the count is what the pool keeps busy.
	AtLimit
	// Ramping: as AtLimit, while the pool ramps up: one replica of headroom
	// on top.
	Ramping
	// Paused: a throttle signal's pause holds the vertex; it does not scale up.
	Paused
	// Cut: the closed loop cut the pool within the lookback; the count holds.
	Cut
	// CoolDown: the count would change, but the last change was too recent.
	CoolDown
	// Bounds: Config.Min or Config.Max sets the count: it was outside them,
	// or the backlog asks for a count outside them.
	Bounds
	// FromZero: the vertex had no replica and starts from Config.Min (at
	// least one when something is pending).
	FromZero
	// Disabled: Config.Disabled leaves the count as it is.
	Disabled
)

var reasonNames = [...]string{Steady: "steady", Backlog: "backlog", AtLimit: "atLimit", Ramping: "ramping",
	Paused: "paused", Cut: "cut", CoolDown: "coolDown", Bounds: "bounds", FromZero: "fromZero", Disabled: "disabled"}

// String returns the reason's name, as the rule's tables print it.
func (r Reason) String() string { return enum.Name(reasonNames[:], r, "Reason") }

// UnmarshalText sets r to the reason named text; any other name is an
// error listing them.
func (r *Reason) UnmarshalText(text []byte) error {
	return enum.Parse(r, reasonNames[:], text, "reason")
}
