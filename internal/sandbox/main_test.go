package sandbox_test

import (
	"os"
	"testing"

	"github.com/renderbox/renderbox/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }
