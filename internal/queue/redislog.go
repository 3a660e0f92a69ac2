package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// LogRedisTo sends go-redis's own messages (a pool that cannot dial, a
// reconnect) to log as JSON records: by default it prints lines of text
// to stderr, in the middle of a JSON log. go-redis has one logger per
// process, so this is for a binary's serve to call once.
func LogRedisTo(log *slog.Logger) { redis.SetLogger(redisLog{log}) }

type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, "redis client", "detail", strings.TrimSpace(fmt.Sprintf(format, v...)))
}
