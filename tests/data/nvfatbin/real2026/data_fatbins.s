// Three fatbinaries cut from libcufft.so.12 (this folder) in `.data`, with no `.nv_fatbin`
// and no wrapper, as cuFFT 12.5 keeps its 18,227: make_data_fatbins.sh links it.
        .data
        .p2align 3
        .quad 0
        .incbin "libcufft.ptx72.fatbin"
        .p2align 3
        .incbin "libcufft.cubin112.fatbin"
        .p2align 3
        .incbin "libcufft.lto128.fatbin"
