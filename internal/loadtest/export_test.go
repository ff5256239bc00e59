package loadtest

// InsertBaselineIn runs the insert baseline in a scratch schema of the
// caller's naming.
var InsertBaselineIn = insertBaseline

// RandomID is the package's random hex id.
var RandomID = randomID

// ParseProcStat parses a /proc/<pid>/stat line.
var ParseProcStat = parseProcStat
