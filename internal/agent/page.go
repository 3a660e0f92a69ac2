package agent

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/renderbox/renderbox/internal/agent/cdp"
	"github.com/renderbox/renderbox/internal/wire"
)

// pollEvery is how often a wait looks again.
const pollEvery = 100 * time.Millisecond

// wait waits as w says after the page's load: a delay, then an element,
// then a JavaScript condition, all within w's timeout.
func wait(c *cdp.Client, mark func(string), s string, w *wire.Wait) error {
	if w == nil {
		return nil
	}
	deadline := time.Now().Add(time.Duration(w.TimeoutMS) * time.Millisecond)
	if w.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(w.DelayMS) * time.Millisecond):
		case <-c.Done():
			return c.Err()
		}
	}
	if w.Selector != "" {
		err := poll(c, deadline, func() (bool, error) {
			_, found, err := querySelector(c, s, w.Selector)
			return found, err
		})
		if err != nil {
			return fmt.Errorf("wait_for_selector %q: %w", w.Selector, err)
		}
		mark("selector matched")
	}
	if w.Expression != "" {
		err := poll(c, deadline, func() (bool, error) {
			var r struct {
				Result struct {
					Value any `json:"value"`
				} `json:"result"`
				ExceptionDetails *struct {
					Text string `json:"text"`
				} `json:"exceptionDetails"`
			}
			if err := c.Call(s, "Runtime.evaluate", map[string]any{
				"expression": "!!(" + w.Expression + "\n)", "returnByValue": true, "awaitPromise": true,
				"timeout": max(1, time.Until(deadline).Milliseconds()),
			}, &r); err != nil {
				return false, err
			}
			if r.ExceptionDetails != nil {
				return false, errors.New(r.ExceptionDetails.Text)
			}
			ok, _ := r.Result.Value.(bool)
			return ok, nil
		})
		if err != nil {
			return fmt.Errorf("wait_for_expression: %w", err)
		}
		mark("expression true")
	}
	return nil
}

// poll calls cond until it is true, fails, or the deadline passes.
func poll(c *cdp.Client, deadline time.Time, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("not met within the wait's time limit (wait_timeout)")
		}
		select {
		case <-time.After(min(pollEvery, left)):
		case <-c.Done():
			return c.Err()
		}
	}
}

// querySelector finds the first element matching selector in the page's
// document. It uses the DOM domain, not the page's JavaScript, so it works
// with scripts off.
func querySelector(c *cdp.Client, s, selector string) (node int, found bool, err error) {
	var doc struct {
		Root struct {
			NodeID int `json:"nodeId"`
		} `json:"root"`
	}
	if err := c.Call(s, "DOM.getDocument", map[string]any{"depth": 0}, &doc); err != nil {
		return 0, false, err
	}
	var q struct {
		NodeID int `json:"nodeId"`
	}
	if err := c.Call(s, "DOM.querySelector", map[string]any{"nodeId": doc.Root.NodeID, "selector": selector}, &q); err != nil {
		return 0, false, err
	}
	return q.NodeID, q.NodeID != 0, nil
}

// elementBox is the border box of the first element selector matches, in
// CSS pixels of the page.
func elementBox(c *cdp.Client, s, selector string) (wire.Rect, error) {
	node, found, err := querySelector(c, s, selector)
	if err != nil {
		return wire.Rect{}, fmt.Errorf("selector %q: %w", selector, err)
	}
	if !found {
		return wire.Rect{}, fmt.Errorf("selector %q matches no element", selector)
	}
	var bm struct {
		Model struct {
			Border []float64 `json:"border"`
		} `json:"model"`
	}
	if err := c.Call(s, "DOM.getBoxModel", map[string]any{"nodeId": node}, &bm); err != nil {
		return wire.Rect{}, fmt.Errorf("selector %q: the element has no box (%w)", selector, err)
	}
	q := bm.Model.Border // x1 y1 … x4 y4, clockwise from the top left
	if len(q) != 8 {
		return wire.Rect{}, fmt.Errorf("selector %q: the element has no box", selector)
	}
	x0, y0 := math.Min(math.Min(q[0], q[2]), math.Min(q[4], q[6])), math.Min(math.Min(q[1], q[3]), math.Min(q[5], q[7]))
	x1, y1 := math.Max(math.Max(q[0], q[2]), math.Max(q[4], q[6])), math.Max(math.Max(q[1], q[3]), math.Max(q[5], q[7]))
	if x1-x0 < 1 || y1-y0 < 1 {
		return wire.Rect{}, fmt.Errorf("selector %q: the element is empty (%.0f×%.0f)", selector, x1-x0, y1-y0)
	}
	return wire.Rect{X: x0, Y: y0, Width: x1 - x0, Height: y1 - y0}, nil
}

// contentHeight is the page's laid-out height in CSS pixels.
func contentHeight(c *cdp.Client, s string) (float64, error) {
	var lm struct {
		CSSContentSize struct {
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	err := c.Call(s, "Page.getLayoutMetrics", nil, &lm)
	return lm.CSSContentSize.Height, err
}

// cssPerInch is CSS pixels per inch.
const cssPerInch = 96

// printSinglePage prints the page on one sheet of the paper's width and the
// content's height: it lays the page out at the sheet's printable width,
// measures it, and prints page 1 of a sheet that tall.
func printSinglePage(c *cdp.Client, s string, o wire.PDFOptions) ([]byte, error) {
	width := o.PaperWidth
	if o.Landscape {
		width = o.PaperHeight
	}
	printable := (width - o.MarginLeft - o.MarginRight) * cssPerInch / math.Max(o.Scale, 0.1)
	if err := c.Call(s, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": int(math.Round(printable)), "height": 600, "deviceScaleFactor": 1, "mobile": false,
	}, nil); err != nil {
		return nil, err
	}
	content, err := contentHeight(c, s)
	if err != nil {
		return nil, err
	}
	if err := c.Call(s, "Emulation.clearDeviceMetricsOverride", nil, nil); err != nil {
		return nil, err
	}
	// Printing lays the page out again; a little room keeps a last line
	// that lands a pixel lower on the sheet.
	h := content*math.Max(o.Scale, 0.1)/cssPerInch*1.02 + o.MarginTop + o.MarginBottom + 0.1
	// Chromium's largest sheet is 200 inches.
	h = math.Min(h, 200)
	o.Landscape = false
	o.PaperWidth, o.PaperHeight = width, h
	o.PageRanges = "1"
	return printPDF(c, s, &o)
}
