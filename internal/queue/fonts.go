package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The font families of each rootfs tree, as its workers publish them
// (GET /v1/fonts): the tree lists them at build (fonts.json), so every
// worker on one tree publishes the same list under its digest.
const (
	fontsPrefix = prefix + "fonts:"
	// FontsTTL is how long a tree's list outlives its workers' last
	// publication; a worker publishes it every FontsTTL/6.
	FontsTTL = time.Hour
)

// PublishFonts records the font families of the rootfs tree digest.
func (q *Queue) PublishFonts(ctx context.Context, digest string, families []string) error {
	b, err := json.Marshal(families)
	if err != nil {
		return err
	}
	if err := q.rdb.Set(ctx, fontsPrefix+digest, b, FontsTTL).Err(); err != nil {
		return fmt.Errorf("publishing the fonts of rootfs %s: %w", digest, err)
	}
	return nil
}

// Fonts returns the font families published for the rootfs tree digest,
// nil when none were.
func (q *Queue) Fonts(ctx context.Context, digest string) ([]string, error) {
	b, err := q.rdb.Get(ctx, fontsPrefix+digest).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var fs []string
	if err := json.Unmarshal(b, &fs); err != nil {
		return nil, fmt.Errorf("the fonts of rootfs %s: %w", digest, err)
	}
	return fs, nil
}
