package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/turnd/turnd/store/sqlite"
	"github.com/turnd/turnd/turn"
)

// Opening the embedded store: open the file, bring its schema up to date,
// and check it before serving.
func Example() {
	dir, err := os.MkdirTemp("", "turnd-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "turnd.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		log.Fatal(err) // a schema behind this binary ends up here
	}

	var store turn.Store = s // what turn.Service is given
	_, err = store.GetSession(ctx, "unknown")
	fmt.Println(err)
	// Output: getting session unknown: not found
}
