package queue

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Memory is what Redis says of its memory: used_memory and maxmemory (0
// when Redis has no bound).
type Memory struct {
	Used, Max int64
}

// Memory reads INFO memory. The API refuses new jobs before Used reaches
// Max: past it a noeviction Redis refuses writes, including the ones that
// finish accepted jobs.
func (q *Queue) Memory(ctx context.Context) (Memory, error) {
	info, err := q.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	found := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			m.Used, err = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			m.Max, err = strconv.ParseInt(v, 10, 64)
		default:
			continue
		}
		if err != nil {
			return Memory{}, fmt.Errorf("INFO memory: %s: %w", k, err)
		}
		found++
	}
	if found != 2 {
		return Memory{}, fmt.Errorf("INFO memory lacks used_memory or maxmemory")
	}
	return m, nil
}
