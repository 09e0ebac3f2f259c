import { render } from 'preact'
import '@xterm/xterm/css/xterm.css'
import './style.css'
import { App } from './app.tsx'

const root = document.getElementById('app')
if (root) render(<App />, root)
