package sandbox

import (
	"context"
	"testing"
	"time"
)

// TestGate: Await returns at once with nothing rendering or a family that
// will not yield, and when the last render leaves otherwise.
func TestGate(t *testing.T) {
	var g Gate
	ctx := context.Background()
	yield := func() bool { return true }
	g.Await(ctx, yield) // nothing renders

	leave := g.Enter()
	g.Await(ctx, func() bool { return false }) // the family is below its reserve

	done := make(chan struct{})
	go func() {
		g.Await(ctx, yield)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("Await returned while a job rendered")
	case <-time.After(100 * time.Millisecond):
	}
	leave()
	leave() // a second call is a no-op
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Await did not return when the render ended")
	}
	if n, _ := g.state(); n != 0 {
		t.Fatalf("%d renders counted after the only one left twice", n)
	}

	leave = g.Enter()
	defer leave()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	g.Await(cctx, yield) // ends with its context
}
