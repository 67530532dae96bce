module cozyrender.local/tools/image/pause

go 1.24
