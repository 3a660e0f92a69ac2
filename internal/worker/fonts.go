package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/renderbox/renderbox/internal/queue"
)

// FontsFile is where a built tree lists its font families
// (rootfs/build.sh).
const FontsFile = "usr/share/renderbox/fonts.json"

// treeFonts reads the font families the tree lists.
func treeFonts(tree string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(tree, FontsFile))
	if err != nil {
		return nil, err
	}
	var f struct {
		Families []string `json:"families"`
	}
	return f.Families, json.Unmarshal(b, &f)
}

// publishFonts publishes the tree's font families under its digest now
// and every FontsTTL/6 until ctx ends. A tree built before it listed
// them has nothing to publish; that is logged once.
func publishFonts(ctx context.Context, q *queue.Queue, tree, digest string, log *slog.Logger) {
	families, err := treeFonts(tree)
	if err != nil {
		log.Warn("the rootfs lists no fonts; GET /v1/fonts cannot show them (rebuild it: make rootfs)", "err", err)
		return
	}
	t := time.NewTicker(queue.FontsTTL / 6)
	defer t.Stop()
	for {
		if err := q.PublishFonts(ctx, digest, families); err != nil && ctx.Err() == nil {
			log.Warn("publishing the rootfs's fonts", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
