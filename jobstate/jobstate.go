// Package jobstate names the five states of a renderbox job. One type is
// shared by every side that carries a state — the ledger's rows, the
// queue's result events, the HTTP API's answers and the Go client — so a
// state spelled differently on two sides of a boundary does not compile.
// Its values are the strings openapi.yaml's Job.state lists; JSON, Redis
// and SQL carry them as plain strings.
//
// It imports nothing, so the client (for third parties) and the lowest
// internal packages can all depend on it.
package jobstate

// State is where a job is in its life.
type State string

// queued and running are live; the other three are terminal and final: a
// job reaches exactly one of them, once.
const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Canceled  State = "canceled"
)

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	return s == Succeeded || s == Failed || s == Canceled
}

// Valid reports whether s is one of the five states.
func (s State) Valid() bool {
	return s == Queued || s == Running || s.Terminal()
}
