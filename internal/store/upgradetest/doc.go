// Package upgradetest holds the upgrade tests of the stores: a database is built at every earlier
// schema version of the embedded migrations, filled with representative data valid at that
// version, upgraded to the latest, and read back through the store and a running server. It has
// no code of its own besides the tests.
package upgradetest
