module github.com/vacancyd/vacancyd

go 1.26.0

require github.com/pelletier/go-toml/v2 v2.4.3
